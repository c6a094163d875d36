-- Schema 7: the records in the order of their runtime IDs. The workloads
-- table was a rowid table: its rows sat in the order they were created,
-- while recover and the monitors write them in the order a watch-list
-- streams the objects (kind, namespace, name: etcd's key order), so each
-- record of a batch of 256 sat on a page of its own and every page went to
-- the write-ahead log (~310 frames a batch). A WITHOUT ROWID table is
-- stored in the order of its primary key, runtime_id
-- (<runtime>-<namespace>|<kind>|<name>): within a runtime and a kind, a
-- batch of the stream is a run of neighbouring rows, a few pages. The
-- indexes' entries carry the runtime ID instead of a rowid, so the state
-- index's entries of a batch are neighbours too. spec, the largest column,
-- comes last: the columns before it are read without its overflow pages.
--
-- The store runs migrations with foreign keys off (the events, clusters
-- and revisions rows reference the records by runtime ID, and dropping the
-- old table must neither fail nor cascade); every row is copied.

CREATE TABLE workloads_by_id (
	runtime_id  TEXT    NOT NULL PRIMARY KEY,
	runtime     TEXT    NOT NULL,
	namespace   TEXT    NOT NULL,
	kind        TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	uid         TEXT    NOT NULL DEFAULT '',
	state       TEXT    NOT NULL,
	message     TEXT    NOT NULL DEFAULT '',
	epoch       INTEGER NOT NULL DEFAULT 1,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	request     TEXT    NOT NULL DEFAULT '',
	expect      TEXT    NOT NULL DEFAULT '',
	reason      TEXT    NOT NULL DEFAULT '',
	exit_code   INTEGER,
	started_at  INTEGER,
	finished_at INTEGER,
	spec        TEXT    NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

INSERT INTO workloads_by_id (runtime_id, runtime, namespace, kind, name, uid, state, message, epoch,
	created_at, updated_at, request, expect, reason, exit_code, started_at, finished_at, spec)
SELECT runtime_id, runtime, namespace, kind, name, uid, state, message, epoch,
	created_at, updated_at, request, expect, reason, exit_code, started_at, finished_at, spec
FROM workloads ORDER BY runtime_id;

DROP TABLE workloads;
ALTER TABLE workloads_by_id RENAME TO workloads;

CREATE INDEX workloads_state ON workloads (state);
CREATE INDEX workloads_namespace ON workloads (namespace, kind, name, runtime_id);
CREATE INDEX workloads_name ON workloads (name);
