-- Schema 5: every spec a record has had, numbered from 1 without gaps
-- (`history`, `update --to-revision`). A record made before this schema, or
-- made again after a deletion, has no row for its current spec until its
-- first update: the update writes it as the next revision first, in the same
-- transaction as the new one, so no spec is ever lost. epoch is the request
-- that recorded the revision (the SpecUpdated event's), 0 for such a base
-- revision. The rows go with their record (ON DELETE CASCADE).

CREATE TABLE revisions (
	runtime_id TEXT    NOT NULL REFERENCES workloads (runtime_id) ON DELETE CASCADE,
	revision   INTEGER NOT NULL CHECK (revision >= 1),
	spec       TEXT    NOT NULL,
	change     TEXT    NOT NULL DEFAULT '',
	epoch      INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (runtime_id, revision)
);
