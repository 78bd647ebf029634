-- Admission per tenant (TENANT_RUNS_IN_FLIGHT): a run that is next in its
-- session asks to be admitted before its Compaction workflow starts, and
-- is admitted while fewer than the bound of its tenant's runs are in
-- flight, oldest first (store.Admit). A run in flight is one that is
-- running, or pending and admitted: its slot is free again the moment the
-- run is final, by the same update that makes it final, so no crash can
-- keep a slot taken. Both times are null for a run that never asked (the
-- bound off, or a session of before this migration).
alter table runs add column admission_asked_at timestamptz;
alter table runs add column admitted_at timestamptz;

-- The tenant's runs in flight, counted under the tenant's lock.
create index runs_in_flight_idx on runs (tenant_id)
    where status = 'running' or (status = 'pending' and admitted_at is not null);
-- The tenant's waiting runs, oldest first.
create index runs_admission_wait_idx on runs (tenant_id, started_at, id)
    where status = 'pending' and admission_asked_at is not null and admitted_at is null;

---- create above / drop below ----

drop index runs_admission_wait_idx;
drop index runs_in_flight_idx;
alter table runs drop column admitted_at;
alter table runs drop column admission_asked_at;
