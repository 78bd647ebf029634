-- Promoting a replay. A replay is a what-if: it leaves the session's
-- watermark and offloads alone and is not the session's state. When a
-- replay repairs a run that failed or ended over its limit, an operator
-- may promote it: it then becomes what the agent continues from, and the
-- session's watermark moves to the one the replay reached (runs.stats
-- holds it as "watermark").
--
-- One promotion per original run. Promotions are history: append-only,
-- and deleted only with their runs (erasure or retention, through the
-- cascade, which the append-only trigger lets through under erase_guard).
create table promotions (
    tenant_id   text not null,
    session_id  text not null,
    run_id      text primary key references runs (id) on delete cascade,
    replay_of   text not null references runs (id) on delete cascade,
    watermark   text not null default '',
    promoted_by text not null default '',
    promoted_at timestamptz not null default now()
);
create unique index promotions_original_idx on promotions (replay_of);
create index promotions_session_idx on promotions (tenant_id, session_id, promoted_at);

create trigger promotions_append_only before update or delete on promotions
    for each row execute function forbid_history_change();
create trigger promotions_no_truncate before truncate on promotions
    for each statement execute function forbid_truncate();

---- create above / drop below ----

drop table promotions;
