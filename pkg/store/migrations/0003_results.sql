-- Schema 3: structured results. Every event and every record gains a
-- machine-readable reason (Completed, Error, BackoffLimitExceeded,
-- ImagePullBackOff, CrashLoopBackOff, Unschedulable, Stopped, Deleted, ...),
-- the container's exit code (NULL when unknown) and the start and finish
-- times of the run (unix nanoseconds, NULL when unknown).
--
-- ContainerWaiting (a pod of the workload waits with a reason: its image
-- cannot be pulled, it crash-loops, it cannot be scheduled) is recorded each
-- time the reason changes, so it is left out of the once-per-object-and-epoch
-- index; the store records it only when the record's reason differs.

ALTER TABLE workloads ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE workloads ADD COLUMN exit_code INTEGER;
ALTER TABLE workloads ADD COLUMN started_at INTEGER;
ALTER TABLE workloads ADD COLUMN finished_at INTEGER;
ALTER TABLE events ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN exit_code INTEGER;
ALTER TABLE events ADD COLUMN started_at INTEGER;
ALTER TABLE events ADD COLUMN finished_at INTEGER;

DROP INDEX events_observed_once;
CREATE UNIQUE INDEX events_observed_once ON events (runtime_id, uid, type, epoch)
	WHERE observed = 1 AND type != 'ContainerWaiting';

-- What the history says without reading messages: a deletion, a stop, a
-- job that ran to its end (a job exits only with all its pods succeeded).
UPDATE events SET reason = 'Deleted' WHERE type IN ('ContainerDeleted', 'DeleteRequested');
UPDATE events SET reason = 'Completed', exit_code = 0 WHERE type = 'ContainerExited'
	AND runtime_id IN (SELECT runtime_id FROM workloads WHERE kind = 'job');
UPDATE workloads SET reason = 'Deleted' WHERE state = 'deleted';
UPDATE workloads SET reason = 'Stopped'
	WHERE state = 'exited' AND request IN ('StopRequested', 'PauseRequested');
UPDATE workloads SET reason = 'Completed', exit_code = 0,
	finished_at = (SELECT MAX(e.time) FROM events e
		WHERE e.runtime_id = workloads.runtime_id AND e.type = 'ContainerExited')
	WHERE state = 'exited' AND kind = 'job' AND request NOT IN ('StopRequested', 'PauseRequested');
UPDATE workloads SET started_at = (SELECT MAX(e.time) FROM events e
		WHERE e.runtime_id = workloads.runtime_id AND e.type = 'ContainerStarted' AND e.epoch = workloads.epoch);
