-- One SQL source for deleting a session's rows. Erasure (a whole
-- session, erase_session_rows) and retention (expired runs,
-- erase_runs_rows) both delete through erase_rows, so that a new table
-- with a session's rows is added in one place; before this, 019 taught
-- erasure about session_log and retention kept its rows forever.
--
-- session_log under retention: a block's row goes with its run only once
-- no live output holds the block, that is once a later reflection of the
-- session condensed it (the session's latest output carries every block
-- not condensed, whatever the age of the run that appended it). The
-- session's erasure takes them all.
--
-- session_log becomes append-only like its siblings: rows leave only
-- through erase_rows, under erase_guard.

create trigger session_log_append_only before update or delete on session_log
    for each row execute function forbid_history_change();

-- erase_rows deletes the rows of runs p_runs of tenant p_tenant; with
-- p_session, the whole session's rows too (offloads, watermarks, events,
-- log, the session itself), under erase_guard, the only way past the
-- append-only triggers. The caller has checked what may go; it returns
-- the number of rows deleted. Not callable by the runtime role: only
-- through the two functions below.
create function erase_rows(p_tenant text, p_session text, p_runs text[]) returns integer
language plpgsql as $$
declare
    n integer := 0;
    k integer;
    whole boolean := p_session is not null;
begin
    insert into erase_guard (txid) values (txid_current()) on conflict do nothing;
    delete from webhook_attempts where delivery_id in (select id from webhook_deliveries where run_id = any(p_runs));
    get diagnostics k = row_count; n := n + k;
    delete from webhook_deliveries where run_id = any(p_runs);
    get diagnostics k = row_count; n := n + k;
    delete from run_steps where run_id = any(p_runs);
    get diagnostics k = row_count; n := n + k;
    delete from drift_verdicts where run_id = any(p_runs);
    get diagnostics k = row_count; n := n + k;
    delete from offloads where tenant_id = p_tenant
        and (run_id = any(p_runs) or (whole and session_id = p_session));
    get diagnostics k = row_count; n := n + k;
    delete from watermark_history where whole and tenant_id = p_tenant and session_id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from watermarks where whole and tenant_id = p_tenant and session_id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from events where tenant_id = p_tenant
        and (run_id = any(p_runs) or (whole and session_id = p_session));
    get diagnostics k = row_count; n := n + k;
    delete from session_log l where l.tenant_id = p_tenant
        and ((whole and l.session_id = p_session)
             or (l.run_id = any(p_runs) and exists (select 1 from session_log x
                 where x.tenant_id = l.tenant_id and x.session_id = l.session_id and l.sha256 = any(x.condensed))));
    get diagnostics k = row_count; n := n + k;
    delete from runs where tenant_id = p_tenant and id = any(p_runs);
    get diagnostics k = row_count; n := n + k;
    delete from sessions where whole and tenant_id = p_tenant and id = p_session;
    get diagnostics k = row_count; n := n + k;
    delete from erase_guard where txid = txid_current();
    return n;
end;
$$;
revoke execute on function erase_rows(text, text, text[]) from public;

create or replace function erase_session_rows(p_erasure text, p_tenant text, p_session text) returns integer
language plpgsql security definer set search_path from current as $$
declare
    n integer;
    runs_of text[];
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
    select coalesce(array_agg(id), '{}') into runs_of from runs where tenant_id = p_tenant and session_id = p_session;
    n := erase_rows(p_tenant, p_session, runs_of);
    update session_erasures set runs = greatest(runs, cardinality(runs_of)), rows_deleted = rows_deleted + n
        where id = p_erasure;
    return n;
end;
$$;

create or replace function erase_runs_rows(p_tenant text, p_runs text[]) returns text[]
language plpgsql security definer set search_path from current as $$
declare
    n integer;
    gone text[];
begin
    select coalesce(array_agg(e.run_id), '{}') into gone from expired_runs(2147483647) e
        where e.tenant_id = p_tenant and e.run_id = any(p_runs);
    if cardinality(gone) = 0 then
        return gone;
    end if;
    n := erase_rows(p_tenant, null, gone);
    insert into retention_sweeps (tenant_id, runs, rows_deleted) values (p_tenant, cardinality(gone), n);
    return gone;
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

create or replace function erase_runs_rows(p_tenant text, p_runs text[]) returns text[]
language plpgsql security definer set search_path from current as $$
declare
    n integer := 0;
    k integer;
    gone text[];
begin
    select coalesce(array_agg(e.run_id), '{}') into gone from expired_runs(2147483647) e
        where e.tenant_id = p_tenant and e.run_id = any(p_runs);
    if cardinality(gone) = 0 then
        return gone;
    end if;
    insert into erase_guard (txid) values (txid_current()) on conflict do nothing;
    delete from webhook_attempts where delivery_id in (select id from webhook_deliveries where run_id = any(gone));
    get diagnostics k = row_count; n := n + k;
    delete from webhook_deliveries where run_id = any(gone);
    get diagnostics k = row_count; n := n + k;
    delete from run_steps where run_id = any(gone);
    get diagnostics k = row_count; n := n + k;
    delete from drift_verdicts where run_id = any(gone);
    get diagnostics k = row_count; n := n + k;
    delete from offloads where run_id = any(gone);
    get diagnostics k = row_count; n := n + k;
    delete from events where tenant_id = p_tenant and run_id = any(gone);
    get diagnostics k = row_count; n := n + k;
    delete from runs where id = any(gone);
    get diagnostics k = row_count; n := n + k;
    delete from erase_guard where txid = txid_current();
    insert into retention_sweeps (tenant_id, runs, rows_deleted) values (p_tenant, cardinality(gone), n);
    return gone;
end;
$$;

drop function erase_rows(text, text, text[]);
drop trigger session_log_append_only on session_log;
