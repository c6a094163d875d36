-- Schema 2: the lifecycle engine. Every requested event raises the record's
-- epoch (what schema 1 called run, raised only by starts), so an observed
-- event is recorded once per object, type and request. request is the type
-- of the last requested event; expect the observed event that completes it
-- when that differs by kind (a job's stop ends with its deletion).

ALTER TABLE workloads RENAME COLUMN run TO epoch;
ALTER TABLE events RENAME COLUMN run TO epoch;
ALTER TABLE workloads ADD COLUMN request TEXT NOT NULL DEFAULT '';
ALTER TABLE workloads ADD COLUMN expect TEXT NOT NULL DEFAULT '';

UPDATE workloads SET request = COALESCE((
	SELECT e.type FROM events e
	WHERE e.runtime_id = workloads.runtime_id AND e.observed = 0
	ORDER BY e.seq DESC LIMIT 1), '');
UPDATE workloads SET expect = 'ContainerDeleted'
	WHERE kind = 'job' AND request IN ('StopRequested', 'PauseRequested');
