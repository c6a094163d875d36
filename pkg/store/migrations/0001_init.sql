-- Schema 1. Times are unix nanoseconds (UTC); spec is the JSON form of
-- spec.ContainerSpec.

CREATE TABLE workloads (
	runtime_id TEXT    NOT NULL PRIMARY KEY,
	runtime    TEXT    NOT NULL,
	namespace  TEXT    NOT NULL,
	kind       TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	uid        TEXT    NOT NULL DEFAULT '',
	spec       TEXT    NOT NULL DEFAULT '{}',
	state      TEXT    NOT NULL,
	message    TEXT    NOT NULL DEFAULT '',
	run        INTEGER NOT NULL DEFAULT 1,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

CREATE INDEX workloads_state ON workloads (state);
-- Serves the namespace filter and the order of List.
CREATE INDEX workloads_namespace ON workloads (namespace, kind, name, runtime_id);
CREATE INDEX workloads_name ON workloads (name);

CREATE TABLE events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	runtime_id TEXT    NOT NULL REFERENCES workloads (runtime_id),
	type       TEXT    NOT NULL,
	message    TEXT    NOT NULL DEFAULT '',
	uid        TEXT    NOT NULL DEFAULT '',
	run        INTEGER NOT NULL,
	observed   INTEGER NOT NULL CHECK (observed IN (0, 1)),
	time       INTEGER NOT NULL
);

CREATE INDEX events_runtime_id ON events (runtime_id, seq);
-- An observed event is recorded once per object and run, whichever process
-- sees it first.
CREATE UNIQUE INDEX events_observed_once ON events (runtime_id, uid, type, run) WHERE observed = 1;

CREATE TABLE leases (
	runtime_id TEXT    NOT NULL PRIMARY KEY,
	owner      TEXT    NOT NULL,
	pid        INTEGER NOT NULL,
	host       TEXT    NOT NULL,
	heartbeat  INTEGER NOT NULL
);

CREATE INDEX leases_owner ON leases (owner);
