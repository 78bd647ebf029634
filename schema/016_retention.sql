-- Retention: a tenant may keep its runs for a number of days; a Temporal
-- Schedule sweeps the runs past it in batches (RetentionSweep), deleting
-- their rows through erase_runs_rows (like erase_session_rows, the only
-- path past the append-only triggers) and then their objects. Each batch
-- is recorded in retention_sweeps.

create table tenant_retention (
    tenant_id   text primary key references tenants (id),
    days        double precision not null check (days > 0),
    updated_at  timestamptz not null default now()
);

create table retention_sweeps (
    id               bigint generated always as identity primary key,
    tenant_id        text not null references tenants (id),
    at               timestamptz not null default now(),
    runs             integer not null,
    rows_deleted     integer not null,
    objects_deleted  integer not null default 0,
    objects_kept     integer not null default 0
);

-- expired_runs lists up to p_limit final runs of tenants with a retention
-- that finished before it: oldest first, leaving out a run still named by
-- a live offload (its session still reads it) or by a replay that is not
-- expired itself.
create function expired_runs(p_limit integer) returns table (tenant_id text, run_id text)
language sql stable as $$
    select r.tenant_id, r.id from runs r join tenant_retention t on t.tenant_id = r.tenant_id
    where r.finished_at is not null
      and r.finished_at < now() - make_interval(secs => t.days * 86400)
      and not exists (select 1 from offloads o where o.run_id = r.id and o.deleted_at is null)
      and not exists (select 1 from runs x where x.replay_of = r.id
                      and (x.finished_at is null or x.finished_at >= now() - make_interval(secs => t.days * 86400)))
    order by r.finished_at, r.id
    limit p_limit
$$;

-- erase_runs_rows deletes the rows of tenant p_tenant's expired runs
-- p_runs (those expired_runs would still list; others are left alone) and
-- records the batch. It returns the ids it deleted.
create function erase_runs_rows(p_tenant text, p_runs text[]) returns text[]
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

---- create above / drop below ----

drop function erase_runs_rows(text, text[]);
drop function expired_runs(integer);
drop table retention_sweeps;
drop table tenant_retention;
