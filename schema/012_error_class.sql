-- A failed run says what kind of failure it was in a field a machine can
-- read (bad_input, config, summarizer, dependency, timeout, canceled,
-- internal, interrupted); its error is a message safe to show its caller,
-- while the detail (SQLSTATEs, error chains, hosts) stays in the logs.

alter table runs add column error_class text not null default '';

---- create above / drop below ----

alter table runs drop column error_class;
