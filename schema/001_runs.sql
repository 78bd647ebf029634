-- Tenants, sessions, compaction runs and what each run did step by step.
-- Text ids everywhere: tenants and sessions are named by the caller, run ids
-- are Temporal workflow run ids.

create table tenants (
    id         text primary key check (id <> ''),
    created_at timestamptz not null default now()
);

create table sessions (
    tenant_id  text not null references tenants (id),
    id         text not null check (id <> ''),
    created_at timestamptz not null default now(),
    primary key (tenant_id, id)
);

create table runs (
    id             text primary key check (id <> ''),
    tenant_id      text not null,
    session_id     text not null,
    event_id       text not null default '',
    trigger        text not null default '',
    preset         text not null default '',
    model          text not null default '',
    prompt_version text not null default '',
    status         text not null default 'pending'
                   check (status in ('pending', 'running', 'succeeded', 'failed', 'skipped')),
    tokens_before  bigint not null default 0,
    tokens_after   bigint not null default 0,
    chars_before   bigint not null default 0,
    chars_after    bigint not null default 0,
    ratio          double precision not null default 0,
    input_key      text not null default '',
    archive_key    text not null default '',
    archive_sha256 text not null default '',
    output_key     text not null default '',
    output_sha256  text not null default '',
    level          text not null default '',
    error          text not null default '',
    -- A replay is a new run that points at the run it replays.
    replay_of      text references runs (id),
    stats          jsonb,
    started_at     timestamptz not null default now(),
    finished_at    timestamptz,
    updated_at     timestamptz not null default now(),
    foreign key (tenant_id, session_id) references sessions (tenant_id, id),
    -- A final run always has a finish time; a live one never has.
    check ((status in ('succeeded', 'failed', 'skipped')) = (finished_at is not null))
);

-- ListRuns pages newest first by (started_at, id), optionally per session.
create index runs_started_idx on runs (started_at desc, id desc);
create index runs_session_started_idx on runs (tenant_id, session_id, started_at desc, id desc);
create index runs_status_idx on runs (status, started_at desc);
create index runs_replay_of_idx on runs (replay_of) where replay_of is not null;

-- One row per activity attempt of a pipeline step; (run_id, name, attempt)
-- makes a retried write of the same attempt a no-op.
create table run_steps (
    id                bigint generated always as identity primary key,
    run_id            text not null references runs (id),
    name              text not null check (name <> ''),
    attempt           integer not null check (attempt >= 0),
    kind              text not null default '',
    input_size        bigint not null default 0,
    output_size       bigint not null default 0,
    prompt_tokens     integer not null default 0,
    completion_tokens integer not null default 0,
    model             text not null default '',
    prompt_version    text not null default '',
    duration          interval not null default '0',
    error             text not null default '',
    at                timestamptz not null default now(),
    unique (run_id, name, attempt)
);

-- Drift verdicts: pass 0 is the first check, pass 1 the check after repair.
create table drift_verdicts (
    run_id     text not null references runs (id),
    -- step names the summary checked (a map-reduce result, the history),
    -- since one run may check several.
    step       text not null default '',
    pass       integer not null check (pass >= 0),
    score      double precision not null,
    passed     boolean not null,
    missing    text[] not null default '{}',
    verdict    text not null default '',
    created_at timestamptz not null default now(),
    primary key (run_id, step, pass)
);

---- create above / drop below ----

drop table drift_verdicts;
drop table run_steps;
drop table runs;
drop table sessions;
drop table tenants;
