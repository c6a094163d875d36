-- Schema 6: one index on events where there were two. events_runtime_id
-- (runtime_id, seq) served the history of a record, and the partial unique
-- events_observed_once (runtime_id, uid, type, epoch) kept an observed event
-- once per object, type and epoch. Every recorded transition wrote an entry
-- into each, at a random place (the order of runtime IDs): two B-tree
-- inserts and two dirty pages per event, most of the write-ahead log of a
-- monitor's batch. events_key is both: its leading runtime_id and epoch
-- serve every query by record (a record's history, sorted by seq, is
-- short); its type and uid are those of the events recorded once (the rows
-- events_observed_once held) and NULL for the others, which a unique index
-- never compares equal: the same uniqueness, on the same rows, as before,
-- and smaller entries for the events that need none.

CREATE UNIQUE INDEX events_key ON events (runtime_id, epoch,
	(CASE WHEN observed = 1 AND type != 'ContainerWaiting' THEN type END),
	(CASE WHEN observed = 1 AND type != 'ContainerWaiting' THEN uid END));
DROP INDEX events_observed_once;
DROP INDEX events_runtime_id;
