-- An incremental event continues a base: the session's latest output,
-- named by its run. Two events on one base would make two outputs that
-- each hold one delta, and the session would continue from one of them,
-- the other's turns lost. base_run_id records the base a run extends;
-- the unique index lets one live extension hold a base (pending, running
-- or committed), so a second is refused by the claim's own insert,
-- whatever the race. A failed run leaves the index and frees its base.
alter table runs add column base_run_id text;

create unique index runs_one_extension_per_base on runs (base_run_id)
    where base_run_id is not null and status <> 'failed';

---- create above / drop below ----

drop index runs_one_extension_per_base;
alter table runs drop column base_run_id;
