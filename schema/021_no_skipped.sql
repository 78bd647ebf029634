-- No code path ends a run 'skipped': a run with nothing to do commits its
-- input unchanged (succeeded), so the status is gone. The final statuses
-- are succeeded, over_limit and failed.

alter table runs drop constraint runs_status_check;
alter table runs add constraint runs_status_check
    check (status in ('pending', 'running', 'succeeded', 'over_limit', 'failed'));
alter table runs drop constraint runs_finished_check;
alter table runs add constraint runs_finished_check
    check ((status in ('succeeded', 'over_limit', 'failed')) = (finished_at is not null));

create or replace function guard_run_change() returns trigger
language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        if erasing() then
            return old;
        end if;
        raise exception 'DELETE on runs: history is append-only'
            using errcode = 'integrity_constraint_violation';
    end if;
    if old.status in ('succeeded', 'over_limit', 'failed') then
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
        if erasing() then
            return old;
        end if;
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
alter table runs drop constraint runs_finished_check;
alter table runs add constraint runs_finished_check
    check ((status in ('succeeded', 'over_limit', 'failed', 'skipped')) = (finished_at is not null));
alter table runs drop constraint runs_status_check;
alter table runs add constraint runs_status_check
    check (status in ('pending', 'running', 'succeeded', 'over_limit', 'failed', 'skipped'));
