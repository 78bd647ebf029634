-- A proxy session's snapshots: its latest state between compactions, a
-- record of its own (not a run's output). Each row names an S3 object
-- holding the host's messages from_message..to_message (counted from 1)
-- and chains to the row of its session whose digest is its base (none
-- for from_message 1: a new chain). The text is in S3 only.
--
-- The rows go with their session: its erasure deletes the sessions row
-- (erase_rows), and these rows with it; under the tenant's retention a
-- row goes once it is older than the retention, through
-- erase_expired_snapshots (the runtime role has no DELETE).
create table session_snapshots (
    tenant_id    text not null,
    session_id   text not null,
    seq          bigint generated always as identity,
    wire         text not null check (wire in ('anthropic-messages', 'openai-chat', 'openai-responses')),
    from_message integer not null,
    to_message   integer not null,
    base         text not null default '',
    digest       text not null check (digest <> ''),
    key          text not null check (key <> ''),
    sha256       text not null check (sha256 <> ''),
    bytes        bigint not null check (bytes >= 0),
    created_at   timestamptz not null default now(),
    primary key (tenant_id, session_id, seq),
    foreign key (tenant_id, session_id) references sessions (tenant_id, id) on delete cascade,
    check (from_message >= 1 and to_message >= from_message),
    check ((from_message = 1) = (base = ''))
);
create index session_snapshots_key on session_snapshots (tenant_id, key);
create index session_snapshots_age on session_snapshots (created_at);
create index session_snapshots_digest on session_snapshots (tenant_id, session_id, digest);

-- erase_expired_snapshots deletes tenant p_tenant's snapshot rows that
-- name object p_key and are past the tenant's retention, and returns
-- how many went. The caller deletes the object when nothing names it
-- any more, in the same transaction.
create function erase_expired_snapshots(p_tenant text, p_key text) returns integer
language plpgsql security definer set search_path from current as $$
declare
    n integer;
begin
    delete from session_snapshots s using tenant_retention t
        where s.tenant_id = p_tenant and s.key = p_key and t.tenant_id = s.tenant_id
          and s.created_at < now() - make_interval(secs => t.days * 86400);
    get diagnostics n = row_count;
    return n;
end;
$$;

---- create above / drop below ----

drop function erase_expired_snapshots(text, text);
drop table session_snapshots;
