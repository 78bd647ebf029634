-- History is append-only, enforced by the database so that no code path (or
-- operator with psql) can rewrite what an audit will read. Only the changes
-- the design allows pass: a run moves until it is final, an offload gains its
-- deleted_at once. Row triggers do not fire on DROP SCHEMA or TRUNCATE.

create function forbid_history_change() returns trigger
language plpgsql as $$
begin
    raise exception '% on %: history is append-only', tg_op, tg_table_name
        using errcode = 'integrity_constraint_violation';
end;
$$;

create trigger run_steps_append_only before update or delete on run_steps
    for each row execute function forbid_history_change();
create trigger drift_verdicts_append_only before update or delete on drift_verdicts
    for each row execute function forbid_history_change();
create trigger watermark_history_append_only before update or delete on watermark_history
    for each row execute function forbid_history_change();
create trigger events_append_only before update or delete on events
    for each row execute function forbid_history_change();

-- A run may change while pending or running; once final it is frozen.
create function guard_run_change() returns trigger
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

create trigger runs_guard before update or delete on runs
    for each row execute function guard_run_change();

-- An offload row may only gain its deletion time, once.
create function guard_offload_change() returns trigger
language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        raise exception 'DELETE on offloads: history is append-only'
            using errcode = 'integrity_constraint_violation';
    end if;
    if old.deleted_at is not null or new.deleted_at is null
       or (new.id, new.tenant_id, new.session_id, new.run_id, new.key, new.tool_id,
           new.tool_name, new.tokens, new.sha256, new.created_at)
          is distinct from
          (old.id, old.tenant_id, old.session_id, old.run_id, old.key, old.tool_id,
           old.tool_name, old.tokens, old.sha256, old.created_at) then
        raise exception 'offload %: only deleted_at may be set, once', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end;
$$;

create trigger offloads_guard before update or delete on offloads
    for each row execute function guard_offload_change();

---- create above / drop below ----

drop trigger offloads_guard on offloads;
drop function guard_offload_change();
drop trigger runs_guard on runs;
drop function guard_run_change();
drop trigger events_append_only on events;
drop trigger watermark_history_append_only on watermark_history;
drop trigger drift_verdicts_append_only on drift_verdicts;
drop trigger run_steps_append_only on run_steps;
drop function forbid_history_change();
