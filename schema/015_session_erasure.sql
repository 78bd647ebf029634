-- Erasing a session. History is append-only for every other path; only
-- erase_session_rows may delete a session's rows, and it leaves a
-- tombstone (session_erasures) that says who asked, when, and what went
-- (counts, and the SHA-256 of every object deleted).
--
-- The append-only triggers let a DELETE through only inside a transaction
-- that holds a row in erase_guard. The runtime role cannot write that
-- table (store.GrantRuntime revokes it); erase_session_rows is SECURITY
-- DEFINER, owned by the migrating role, so it can. The runtime role may
-- call the function, which erases exactly one session of one tenant and
-- records its tombstone: it is no way to rewrite anything else.

create table erase_guard (
    txid bigint primary key
);

create function erasing() returns boolean
language sql stable as $$
    select exists (select 1 from erase_guard where txid = txid_current())
$$;

create table session_erasures (
    id               text primary key,
    tenant_id        text not null references tenants (id),
    session_id       text not null,
    requested_by     text not null,
    requested_at     timestamptz not null default now(),
    finished_at      timestamptz,
    runs             integer not null default 0,
    rows_deleted     integer not null default 0,
    objects_deleted  integer not null default 0,
    objects_kept     integer not null default 0,
    deleted_sha256   text[] not null default '{}'
);

create index session_erasures_session_idx on session_erasures (tenant_id, session_id);

create or replace function forbid_history_change() returns trigger
language plpgsql as $$
begin
    if tg_op = 'DELETE' and erasing() then
        return old;
    end if;
    raise exception '% on %: history is append-only', tg_op, tg_table_name
        using errcode = 'integrity_constraint_violation';
end;
$$;

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

create or replace function guard_offload_change() returns trigger
language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        if erasing() then
            return old;
        end if;
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

-- erase_session_rows deletes every row of session p_session of tenant
-- p_tenant that holds something of its conversations (runs and their
-- steps, drift verdicts, webhook deliveries; offloads; watermarks; events;
-- the session's own row)
-- and adds the counts to tombstone p_erasure (safe to repeat: a second
-- call finds nothing). It refuses while a run of the session is live.
-- The objects go next (the erasure workflow), then the tombstone is
-- finished with their counts and digests.
create function erase_session_rows(p_erasure text, p_tenant text, p_session text) returns integer
language plpgsql security definer set search_path from current as $$
declare
    n integer := 0;
    k integer;
    run_count integer;
begin
    if not exists (select 1 from session_erasures where id = p_erasure and tenant_id = p_tenant
                   and session_id = p_session and finished_at is null) then
        raise exception 'erasure %: not an unfinished erasure of session % of tenant %', p_erasure, p_session, p_tenant
            using errcode = 'integrity_constraint_violation';
    end if;
    if exists (select 1 from runs where tenant_id = p_tenant and session_id = p_session
               and status in ('pending', 'running')) then
        raise exception 'session % of tenant %: a run is live', p_session, p_tenant
            using errcode = 'object_in_use';
    end if;
    insert into erase_guard (txid) values (txid_current()) on conflict do nothing;
    select count(*) into run_count from runs where tenant_id = p_tenant and session_id = p_session;
    delete from webhook_attempts where delivery_id in (select d.id from webhook_deliveries d join runs r on r.id = d.run_id
        where r.tenant_id = p_tenant and r.session_id = p_session);
    get diagnostics k = row_count; n := n + k;
    delete from webhook_deliveries where run_id in (select id from runs where tenant_id = p_tenant and session_id = p_session);
    get diagnostics k = row_count; n := n + k;
    delete from run_steps where run_id in (select id from runs where tenant_id = p_tenant and session_id = p_session);
    get diagnostics k = row_count; n := n + k;
    delete from drift_verdicts where run_id in (select id from runs where tenant_id = p_tenant and session_id = p_session);
    get diagnostics k = row_count; n := n + k;
    delete from offloads where tenant_id = p_tenant and session_id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from watermark_history where tenant_id = p_tenant and session_id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from watermarks where tenant_id = p_tenant and session_id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from events where tenant_id = p_tenant and session_id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from runs where tenant_id = p_tenant and session_id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from sessions where tenant_id = p_tenant and id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from erase_guard where txid = txid_current();
    update session_erasures set runs = greatest(runs, run_count), rows_deleted = rows_deleted + n
        where id = p_erasure;
    return n;
end;
$$;

---- create above / drop below ----

drop function erase_session_rows(text, text, text);
create or replace function guard_offload_change() returns trigger
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
create or replace function forbid_history_change() returns trigger
language plpgsql as $$
begin
    raise exception '% on %: history is append-only', tg_op, tg_table_name
        using errcode = 'integrity_constraint_violation';
end;
$$;
drop table session_erasures;
drop function erasing();
drop table erase_guard;
