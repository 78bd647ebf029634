-- Originals a failed submit stored and then deleted, because no run
-- referred to them. Originals are content-addressed, so another submit of
-- the same bytes may have written the same object just before the delete:
-- its claim (which shares the key's advisory lock with the delete) sees
-- discarded = true, writes the object again and sets it false, so a
-- claimed run never names a deleted original.

create table input_discards (
    key          text primary key,
    tenant_id    text not null,
    discarded    boolean not null,
    updated_at   timestamptz not null default now()
);

---- create above / drop below ----

drop table input_discards;
