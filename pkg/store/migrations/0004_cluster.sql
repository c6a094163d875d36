-- Schema 4: the cluster each record's workload lives on (the API server's
-- address and its CA's fingerprint), so that a verb run after the current
-- context changed does not act on, or record the absence of, another
-- cluster's objects. A table of its own: records made before it, and those
-- of processes that were killed between the create and this row, have none
-- and learn it at their next verb.

CREATE TABLE clusters (
	runtime_id TEXT NOT NULL PRIMARY KEY REFERENCES workloads (runtime_id) ON DELETE CASCADE,
	cluster    TEXT NOT NULL
);
