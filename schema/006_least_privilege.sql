-- Audit tables cannot be emptied: row triggers do not fire on TRUNCATE, so
-- a statement trigger refuses it on every table whose rows are history.
--
-- A step executed again after its worker died (a local activity re-runs
-- with the same attempt number) is recorded as its own row: the key gains
-- the execution id the activity draws once per execution, so a retried
-- write of one execution still adds nothing.

create function forbid_truncate() returns trigger
language plpgsql as $$
begin
    raise exception 'TRUNCATE on %: history is append-only', tg_table_name
        using errcode = 'integrity_constraint_violation';
end;
$$;

create trigger runs_no_truncate before truncate on runs
    for each statement execute function forbid_truncate();
create trigger run_steps_no_truncate before truncate on run_steps
    for each statement execute function forbid_truncate();
create trigger drift_verdicts_no_truncate before truncate on drift_verdicts
    for each statement execute function forbid_truncate();
create trigger events_no_truncate before truncate on events
    for each statement execute function forbid_truncate();
create trigger watermark_history_no_truncate before truncate on watermark_history
    for each statement execute function forbid_truncate();
create trigger offloads_no_truncate before truncate on offloads
    for each statement execute function forbid_truncate();

alter table run_steps add column execution text not null default '';
alter table run_steps drop constraint run_steps_run_id_name_attempt_key;
alter table run_steps add constraint run_steps_execution_key unique (run_id, name, attempt, execution);

---- create above / drop below ----

alter table run_steps drop constraint run_steps_execution_key;
delete from run_steps a using run_steps b
    where a.run_id = b.run_id and a.name = b.name and a.attempt = b.attempt and a.id > b.id;
alter table run_steps add constraint run_steps_run_id_name_attempt_key unique (run_id, name, attempt);
alter table run_steps drop column execution;
drop trigger offloads_no_truncate on offloads;
drop trigger watermark_history_no_truncate on watermark_history;
drop trigger events_no_truncate on events;
drop trigger drift_verdicts_no_truncate on drift_verdicts;
drop trigger run_steps_no_truncate on run_steps;
drop trigger runs_no_truncate on runs;
drop function forbid_truncate();
