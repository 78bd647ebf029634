-- Lifecycle an integrator can undo and read.
--
-- Event ids are unique per session, not per tenant: two sessions may both
-- start with the caller's "e1". The claim's conflict check reads the same
-- key.
alter table events drop constraint events_pkey;
alter table events add primary key (tenant_id, session_id, event_id);

-- A session name erased and used again starts a new generation: the
-- first event after the erasure creates the row with the number of
-- erasures before it plus one, and the answers say so.
alter table sessions add column generation integer not null default 1 check (generation > 0);

-- Retention can be unset: the row stays (the runtime role has no DELETE)
-- with days null, which expired_runs never matches (null arithmetic).
alter table tenant_retention alter column days drop not null;

-- One live endpoint per URL and tenant: registering the same URL again
-- answers the endpoint already there, so a run is never delivered twice
-- to one receiver under two secrets. Duplicates registered before this
-- migration keep their oldest endpoint; the others stop.
update webhook_endpoints w set deleted_at = now()
where w.deleted_at is null and exists (
    select 1 from webhook_endpoints o
    where o.tenant_id = w.tenant_id and o.url = w.url and o.deleted_at is null
      and (o.created_at, o.id) < (w.created_at, w.id));
create unique index webhook_endpoints_url_idx on webhook_endpoints (tenant_id, url) where deleted_at is null;

---- create above / drop below ----

drop index webhook_endpoints_url_idx;
update tenant_retention set days = 36500 where days is null;
alter table tenant_retention alter column days set not null;
alter table sessions drop column generation;
alter table events drop constraint events_pkey;
alter table events add primary key (tenant_id, event_id);
