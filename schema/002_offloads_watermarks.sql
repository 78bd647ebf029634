-- Offloaded tool results (seeds 002 and 004) and checkpoint watermarks
-- (seed 001), both per session.

create table offloads (
    id         bigint generated always as identity primary key,
    tenant_id  text not null,
    session_id text not null,
    run_id     text references runs (id),
    key        text not null check (key <> ''),
    tool_id    text not null default '',
    tool_name  text not null default '',
    tokens     integer not null default 0,
    sha256     text not null default '',
    created_at timestamptz not null default now(),
    -- Deletion of the stored object is recorded, the row is kept for audit.
    deleted_at timestamptz,
    foreign key (tenant_id, session_id) references sessions (tenant_id, id)
);

-- A key is live at most once per session; once deleted, the same content may
-- be offloaded again by a later run as a new row.
create unique index offloads_live_key_idx on offloads (tenant_id, session_id, key)
    where deleted_at is null;
create index offloads_session_idx on offloads (tenant_id, session_id, created_at);

-- The current watermark of each session.
create table watermarks (
    tenant_id   text not null,
    session_id  text not null,
    tool_use_id text not null check (tool_use_id <> ''),
    run_id      text not null default '',
    updated_at  timestamptz not null default now(),
    primary key (tenant_id, session_id),
    foreign key (tenant_id, session_id) references sessions (tenant_id, id)
);

-- Every watermark a session ever had. A watermark only advances and tool_use
-- ids are unique in a conversation, so a tool_use id seen before is a retry.
create table watermark_history (
    seq         bigint generated always as identity,
    tenant_id   text not null,
    session_id  text not null,
    tool_use_id text not null check (tool_use_id <> ''),
    run_id      text not null default '',
    created_at  timestamptz not null default now(),
    primary key (tenant_id, session_id, tool_use_id),
    foreign key (tenant_id, session_id) references sessions (tenant_id, id)
);

---- create above / drop below ----

drop table watermark_history;
drop table watermarks;
drop table offloads;
