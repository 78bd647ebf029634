-- error_cause says why a failed run's dependency call failed, beside its
-- error_class, in the words webhook deliveries use (internal/netcause):
-- "refused", "timeout", "dns", "tls", "connection reset", "connection
-- failed" when no answer came, "http 503" when one did. Set today for
-- the summarizer's failures; '' when the run's error has no such cause.
alter table runs add column error_cause text not null default '';

---- create above / drop below ----

alter table runs drop column error_cause;
