-- Schema 9: a record's history is a chain, and events has no index but its
-- rowid. events_key (schema 6) led with the runtime ID: each event of a
-- batch went into a leaf of its own, ~175 of the ~232 pages of write-ahead
-- log a monitor's batch of 250 transitions wrote (TestApplyBatchFrames).
-- Now the record keeps the seq of its last event (last_seq) and each event
-- the seq of the one before it of the same record (prev, 0 for the first):
-- an event is appended at the table's tail, and the record's row, written
-- in the same batch anyway, gets its new last_seq. A record's history is
-- read by following the chain (rowid lookups).
--
-- The once-per-object-and-epoch rule the unique index kept (an observed
-- event but ContainerWaiting recorded with observed = 1 at most once per
-- runtime ID, epoch, type and UID) is decided by the writer, which reads the
-- record inside its write transaction: once_mask holds the types of those
-- events recorded in epoch once_epoch for the UID once_uid (bits: see
-- onceBit in machine.go); an event of that epoch about another UID is
-- checked by following the chain.
--
-- events loses its foreign key: without an index on runtime_id, SQLite
-- would scan the whole table for each record deleted; the store deletes a
-- record's events itself (by its chain). The table is rebuilt (a column's
-- constraint cannot be dropped), as is workloads, so that the new columns
-- come before spec (schema 7: read without the spec's overflow pages).
-- Migrations run with foreign keys off.

CREATE TEMP TABLE events_next_seq AS SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS seq;

CREATE TABLE events_chain (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	runtime_id  TEXT    NOT NULL,
	type        TEXT    NOT NULL,
	message     TEXT    NOT NULL DEFAULT '',
	uid         TEXT    NOT NULL DEFAULT '',
	epoch       INTEGER NOT NULL,
	observed    INTEGER NOT NULL CHECK (observed IN (0, 1)),
	time        INTEGER NOT NULL,
	reason      TEXT    NOT NULL DEFAULT '',
	exit_code   INTEGER,
	started_at  INTEGER,
	finished_at INTEGER,
	prev        INTEGER NOT NULL DEFAULT -1
);

INSERT INTO events_chain (seq, runtime_id, type, message, uid, epoch, observed, time, reason, exit_code,
	started_at, finished_at, prev)
SELECT seq, runtime_id, type, message, uid, epoch, observed, time, reason, exit_code, started_at, finished_at,
	COALESCE(LAG(seq) OVER (PARTITION BY runtime_id ORDER BY seq), 0)
FROM events ORDER BY seq;

CREATE TABLE workloads_chain (
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
	last_seq    INTEGER NOT NULL DEFAULT 0,
	once_epoch  INTEGER NOT NULL DEFAULT 0,
	once_uid    TEXT    NOT NULL DEFAULT '',
	once_mask   INTEGER NOT NULL DEFAULT 0,
	spec        TEXT    NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

-- The bits of once_mask: ContainerStarted 1, ContainerExited 2,
-- ContainerFailed 4, ContainerDeleted 8, ContainerPaused 16.
INSERT INTO workloads_chain (runtime_id, runtime, namespace, kind, name, uid, state, message, epoch,
	created_at, updated_at, request, expect, reason, exit_code, started_at, finished_at,
	last_seq, once_epoch, once_uid, once_mask, spec)
SELECT w.runtime_id, w.runtime, w.namespace, w.kind, w.name, w.uid, w.state, w.message, w.epoch,
	w.created_at, w.updated_at, w.request, w.expect, w.reason, w.exit_code, w.started_at, w.finished_at,
	COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.runtime_id = w.runtime_id), 0),
	w.epoch, w.uid,
	COALESCE((SELECT SUM(DISTINCT CASE e.type WHEN 'ContainerStarted' THEN 1 WHEN 'ContainerExited' THEN 2
			WHEN 'ContainerFailed' THEN 4 WHEN 'ContainerDeleted' THEN 8 WHEN 'ContainerPaused' THEN 16 END)
		FROM events e WHERE e.runtime_id = w.runtime_id AND e.epoch = w.epoch AND e.uid = w.uid
			AND e.observed = 1 AND e.type != 'ContainerWaiting'), 0),
	w.spec
FROM workloads w ORDER BY w.runtime_id;

DROP TABLE events;
ALTER TABLE events_chain RENAME TO events;
-- AUTOINCREMENT goes on after the largest seq ever given, as before.
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM temp.events_next_seq)) WHERE name = 'events';
INSERT INTO sqlite_sequence (name, seq) SELECT 'events', seq FROM temp.events_next_seq
	WHERE seq > 0 AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events');
DROP TABLE temp.events_next_seq;

DROP TABLE workloads;
ALTER TABLE workloads_chain RENAME TO workloads;

CREATE INDEX workloads_state ON workloads (state);
CREATE INDEX workloads_namespace ON workloads (namespace, kind, name, runtime_id);
CREATE INDEX workloads_name ON workloads (name);

-- A process of a binary of schema 8, still running when a newer one
-- migrated, inserts events without prev (so the column's default, -1: this
-- binary always writes prev) by INSERT OR IGNORE, relying on events_key for
-- the once-per-object-and-epoch rule, and never sets last_seq. These
-- triggers do for it what this binary's writer does (chainHead.recorded):
-- skip an observed event the record's once columns have, append the event
-- to the record's chain and move the once columns. They cost this binary's
-- inserts one comparison (prev = -1). Events an older process records about
-- another UID than the once columns keep are not checked against the chain.
CREATE TRIGGER events_older_writer_once BEFORE INSERT ON events
WHEN NEW.prev = -1 AND NEW.observed = 1
BEGIN
	SELECT RAISE(IGNORE) FROM workloads w
	WHERE w.runtime_id = NEW.runtime_id AND w.once_epoch = NEW.epoch AND w.once_uid = NEW.uid
		AND (w.once_mask & (CASE NEW.type WHEN 'ContainerStarted' THEN 1 WHEN 'ContainerExited' THEN 2
			WHEN 'ContainerFailed' THEN 4 WHEN 'ContainerDeleted' THEN 8 WHEN 'ContainerPaused' THEN 16 ELSE 0 END)) != 0;
END;

CREATE TRIGGER events_older_writer_chain AFTER INSERT ON events
WHEN NEW.prev = -1
BEGIN
	UPDATE events SET prev = coalesce((SELECT last_seq FROM workloads WHERE runtime_id = NEW.runtime_id), 0)
	WHERE seq = NEW.seq;
	UPDATE workloads SET
		last_seq = NEW.seq,
		once_epoch = NEW.epoch,
		once_uid = CASE WHEN once_epoch = NEW.epoch THEN once_uid ELSE NEW.uid END,
		once_mask = (CASE WHEN once_epoch = NEW.epoch THEN once_mask ELSE 0 END) |
			(CASE WHEN NEW.observed = 1 AND NEW.uid = (CASE WHEN once_epoch = NEW.epoch THEN once_uid ELSE NEW.uid END)
			THEN (CASE NEW.type WHEN 'ContainerStarted' THEN 1 WHEN 'ContainerExited' THEN 2
				WHEN 'ContainerFailed' THEN 4 WHEN 'ContainerDeleted' THEN 8 WHEN 'ContainerPaused' THEN 16 ELSE 0 END)
			ELSE 0 END)
	WHERE runtime_id = NEW.runtime_id;
END;
