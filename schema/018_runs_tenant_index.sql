-- A tenant's run listing (GET /v1/runs, newest first) in a database that
-- tenants share. runs_started_idx does not start with the tenant, so a
-- page of a tenant with 1% of the runs read about 100 rows of others per
-- row it returned (BENCHMARKS.md, measurement 9); this index reads only
-- the tenant's own rows, newest first, and pages after a cursor the same
-- way.
create index runs_tenant_started_idx on runs (tenant_id, started_at desc, id desc);

---- create above / drop below ----

drop index runs_tenant_started_idx;
