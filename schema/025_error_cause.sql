-- error_cause says why a failed run's dependency call failed, beside its
-- error_class, in the words webhook deliveries use (internal/netcause):
-- "refused", "timeout", "dns", "tls", "connection reset", "connection
-- failed" when no answer came, "http 503" when one did. Set today for
-- the summarizer's failures; '' when the run's error has no such cause.
alter table runs add column error_cause text not null default '';

-- observed_turns counts the agent's calls since the session's previous
-- compaction, as an incremental event shows them (the assistant messages
-- it appends to its base): the horizon a run's net saving is priced over
-- (cost.turns), where a session's own pace is known. 0: not known (a
-- whole conversation), and COST_TURNS is used.
alter table runs add column observed_turns integer not null default 0 check (observed_turns >= 0);

---- create above / drop below ----

alter table runs drop column observed_turns;
alter table runs drop column error_cause;
