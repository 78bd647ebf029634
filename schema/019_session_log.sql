-- The session log: one row per summary block a committed run appended to
-- a session's append-only log (policy.SessionLog). The block's text lives
-- in the run's output (and in the conversation the agent holds); the row
-- holds its SHA-256, so that a later run reads as a block only text this
-- service wrote for this tenant and session, and never any conversation
-- text. A reflection's row names the blocks it condensed.
create table session_log (
    tenant_id  text not null,
    session_id text not null,
    sha256     text not null check (sha256 ~ '^[0-9a-f]{64}$'),
    run_id     text not null check (run_id <> ''),
    label      text not null default '',
    tokens     bigint not null default 0,
    reflection boolean not null default false,
    condensed  text[] not null default '{}',
    seq        bigint generated always as identity,
    created_at timestamptz not null default now(),
    primary key (tenant_id, session_id, sha256),
    foreign key (tenant_id, session_id) references sessions (tenant_id, id)
);

create trigger session_log_no_truncate before truncate on session_log
    for each statement execute function forbid_truncate();

-- An erasure deletes the session's log rows too.
create or replace function erase_session_rows(p_erasure text, p_tenant text, p_session text) returns integer
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
    delete from session_log where tenant_id = p_tenant and session_id = p_session;
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

create or replace function erase_session_rows(p_erasure text, p_tenant text, p_session text) returns integer
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

drop table session_log;
