-- The run row holds what the caller asked for, recorded at submit: the
-- agent's model and context limit, the effective overrides and the input's
-- digest, so that replay, status and audit read Postgres only (runs.model
-- is the summarizer model). Older rows have them empty; a replay of one
-- falls back to the run's Temporal history while it exists.

alter table runs add column agent_model text not null default '';
alter table runs add column context_limit integer not null default 0 check (context_limit >= 0);
alter table runs add column overrides jsonb;
alter table runs add column input_sha256 text not null default '';

---- create above / drop below ----

alter table runs drop column input_sha256;
alter table runs drop column overrides;
alter table runs drop column context_limit;
alter table runs drop column agent_model;
