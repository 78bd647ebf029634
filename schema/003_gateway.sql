-- What the HTTP gateway needs: event dedup and API keys.

-- One row per accepted event. No foreign key to runs: the gateway claims the
-- event before the workflow that creates the run exists.
create table events (
    tenant_id   text not null references tenants (id),
    event_id    text not null check (event_id <> ''),
    session_id  text not null,
    body_sha256 text not null,
    run_id      text not null,
    created_at  timestamptz not null default now(),
    primary key (tenant_id, event_id),
    foreign key (tenant_id, session_id) references sessions (tenant_id, id)
);

-- Keys are stored as the hex sha256 of the raw key, never the key itself.
create table api_keys (
    key_hash   text primary key check (key_hash ~ '^[0-9a-f]{64}$'),
    tenant_id  text not null references tenants (id),
    created_at timestamptz not null default now(),
    revoked_at timestamptz
);

create index api_keys_tenant_idx on api_keys (tenant_id);

---- create above / drop below ----

drop table api_keys;
drop table events;
