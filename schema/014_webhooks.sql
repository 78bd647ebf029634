-- Completion webhooks. A tenant registers endpoints; when a run reaches
-- its final state, one delivery per live endpoint is recorded and POSTed
-- by a Temporal workflow (WebhookDelivery), signed as the Standard
-- Webhooks specification says. The delivery's id is the `webhook-id`
-- header: stable across retries and redeliveries, so receivers can
-- deduplicate. Every attempt is logged with its response code and a short
-- prefix of the response body (never the whole body).
--
-- The secret is kept in clear: signing needs it. It is shown to the
-- caller at registration and at rotation only; a rotated-out secret keeps
-- signing beside the new one until previous_expires_at, so receivers can
-- switch without a gap.

create table webhook_endpoints (
    id                   text primary key,
    tenant_id            text not null references tenants (id),
    url                  text not null,
    description          text not null default '',
    secret               text not null,
    previous_secret      text,
    previous_expires_at  timestamptz,
    created_at           timestamptz not null default now(),
    rotated_at           timestamptz,
    deleted_at           timestamptz
);

create index webhook_endpoints_tenant_idx on webhook_endpoints (tenant_id) where deleted_at is null;

create table webhook_deliveries (
    id             text primary key,
    tenant_id      text not null references tenants (id),
    endpoint_id    text not null references webhook_endpoints (id),
    run_id         text not null references runs (id),
    event_type     text not null,
    status         text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
    attempts       integer not null default 0,
    last_code      integer,
    last_error     text not null default '',
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    delivered_at   timestamptz,
    unique (endpoint_id, run_id, event_type)
);

create index webhook_deliveries_run_idx on webhook_deliveries (run_id);

create table webhook_attempts (
    delivery_id     text not null references webhook_deliveries (id),
    attempt         integer not null,
    at              timestamptz not null default now(),
    code            integer,
    error           text not null default '',
    response_prefix text not null default '',
    duration_ms     integer not null default 0,
    primary key (delivery_id, attempt)
);

-- The attempt log is history: rows are added, never changed or removed.
create trigger webhook_attempts_no_truncate before truncate on webhook_attempts
    for each statement execute function forbid_truncate();

---- create above / drop below ----

drop trigger webhook_attempts_no_truncate on webhook_attempts;
drop table webhook_attempts;
drop table webhook_deliveries;
drop table webhook_endpoints;
