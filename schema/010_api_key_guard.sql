-- An API key's identity and revocation are final: whoever updates a row
-- (the runtime role records last use, the CLI revokes), a revoked key is
-- never revived and a key never moves to another tenant or hash.

create function guard_api_key_change() returns trigger
language plpgsql as $$
begin
    if new.key_hash is distinct from old.key_hash or new.tenant_id is distinct from old.tenant_id then
        raise exception 'api key %: its hash and tenant do not change', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    if old.revoked_at is not null and new.revoked_at is distinct from old.revoked_at then
        raise exception 'api key %: revoked at %, for good', old.id, old.revoked_at
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end;
$$;

create trigger api_keys_guard before update on api_keys
    for each row execute function guard_api_key_change();

---- create above / drop below ----

drop trigger api_keys_guard on api_keys;
drop function guard_api_key_change();
