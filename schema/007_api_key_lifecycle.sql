-- API keys like a real service: a public id to list and revoke a key by,
-- the first characters of the key to recognise it, an optional expiry and
-- the time of last use. The key itself is still stored only as its sha256.

alter table api_keys add column id text generated always as (substr(key_hash, 1, 16)) stored;
create unique index api_keys_id_idx on api_keys (id);
alter table api_keys add column prefix text not null default '';
alter table api_keys add column expires_at timestamptz;
alter table api_keys add column last_used_at timestamptz;

---- create above / drop below ----

alter table api_keys drop column last_used_at;
alter table api_keys drop column expires_at;
alter table api_keys drop column prefix;
drop index api_keys_id_idx;
alter table api_keys drop column id;
