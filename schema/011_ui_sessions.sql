-- Web UI sign-ins. The browser holds an opaque random id; only its sha256
-- is stored, so a copy of this table signs no one in. A session is bound
-- to the API key it was opened with: it ends at its expiry, at sign-out
-- (ended_at) and, because every lookup joins the key, the moment its key
-- is revoked or expires.

create table ui_sessions (
    id_hash    text primary key check (id_hash ~ '^[0-9a-f]{64}$'),
    key_hash   text not null references api_keys (key_hash),
    tenant_id  text not null references tenants (id),
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    ended_at   timestamptz
);

create index ui_sessions_key_idx on ui_sessions (key_hash);

-- What a session is bound to never changes, and an ended session stays
-- ended: the runtime role may only set ended_at, once.
create function guard_ui_session_change() returns trigger
language plpgsql as $$
begin
    if new.id_hash is distinct from old.id_hash or new.key_hash is distinct from old.key_hash
        or new.tenant_id is distinct from old.tenant_id or new.created_at is distinct from old.created_at
        or new.expires_at is distinct from old.expires_at then
        raise exception 'ui session: only its end may be recorded'
            using errcode = 'integrity_constraint_violation';
    end if;
    if old.ended_at is not null and new.ended_at is distinct from old.ended_at then
        raise exception 'ui session: ended at %, for good', old.ended_at
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end;
$$;

create trigger ui_sessions_guard before update on ui_sessions
    for each row execute function guard_ui_session_change();

---- create above / drop below ----

drop trigger ui_sessions_guard on ui_sessions;
drop function guard_ui_session_change();
drop table ui_sessions;
