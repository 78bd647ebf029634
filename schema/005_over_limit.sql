-- A run whose output is still over the model's limit after every step ends
-- 'over_limit': final like 'succeeded' (its output is stored and can be
-- fetched), but never called a success. The reason is in runs.error.

alter table runs drop constraint runs_status_check;
alter table runs add constraint runs_status_check
    check (status in ('pending', 'running', 'succeeded', 'over_limit', 'failed', 'skipped'));
alter table runs drop constraint runs_check;
alter table runs add constraint runs_finished_check
    check ((status in ('succeeded', 'over_limit', 'failed', 'skipped')) = (finished_at is not null));

create or replace function guard_run_change() returns trigger
language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        raise exception 'DELETE on runs: history is append-only'
            using errcode = 'integrity_constraint_violation';
    end if;
    if old.status in ('succeeded', 'over_limit', 'failed', 'skipped') then
        raise exception 'run %: status % is final', old.id, old.status
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end;
$$;

---- create above / drop below ----

create or replace function guard_run_change() returns trigger
language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        raise exception 'DELETE on runs: history is append-only'
            using errcode = 'integrity_constraint_violation';
    end if;
    if old.status in ('succeeded', 'failed', 'skipped') then
        raise exception 'run %: status % is final', old.id, old.status
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end;
$$;
alter table runs drop constraint runs_finished_check;
alter table runs add constraint runs_check
    check ((status in ('succeeded', 'failed', 'skipped')) = (finished_at is not null));
alter table runs drop constraint runs_status_check;
alter table runs add constraint runs_status_check
    check (status in ('pending', 'running', 'succeeded', 'failed', 'skipped'));
