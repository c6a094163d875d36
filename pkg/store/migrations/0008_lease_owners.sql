-- Schema 8: one heartbeat per lease owner. A process renewed its leases by
-- setting the heartbeat of every lease it held, every 5 s: a monitor of
-- 100,000 IDs rewrote 20,000 rows a second (~1,200 pages of write-ahead log
-- and ~90 ms of CPU a renewal), competing for the write lock and the cores
-- with its own writer. Liveness is a property of the process: it renews one
-- row here. A lease's heartbeat is now the time it was acquired; the lease
-- is live while the later of that and its owner's heartbeat is within the
-- TTL (leases.heartbeat of a process of an older binary, still renewing
-- them, keeps counting).
--
-- Each owner holding leases starts with its latest lease heartbeat: it
-- stays as live as its leases were.

CREATE TABLE lease_owners (
	owner     TEXT    NOT NULL PRIMARY KEY,
	pid       INTEGER NOT NULL,
	host      TEXT    NOT NULL,
	heartbeat INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO lease_owners (owner, pid, host, heartbeat)
SELECT owner, pid, host, max(heartbeat) FROM leases GROUP BY owner;
