-- The preset a run works with, resolved at submit (built-in numbers, then
-- the deployment's overrides, then the caller's), so that replay, status
-- and audit read the exact settings from Postgres. Older rows have none.

alter table runs add column resolved_preset jsonb;

---- create above / drop below ----

alter table runs drop column resolved_preset;
