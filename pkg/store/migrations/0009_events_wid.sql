-- Schema 9: events found by a small integer per record, not its runtime ID.
-- events_key (schema 6) led with the runtime ID (~30-60 bytes): every
-- recorded transition inserted an entry of ~40-100 bytes into the record's
-- run of entries, so a record's history filled a leaf of its own and a
-- batch of 250 transitions dirtied ~175 leaves of it, three quarters of
-- the ~232 pages it wrote to the write-ahead log (BenchmarkApplyBatch).
-- A record now has wid, an integer given once when its row is inserted
-- (1, 2, 3, ... in the order the records were made; the existing ones in
-- the order of their runtime IDs), and its events carry it: the index's
-- entries are a third of the size, the records made together (recover's
-- watch-list order) are neighbours, and the same batch dirties about half
-- the pages. Queries by record find wid through the workloads' primary key.
--
-- wid is given by the trigger workloads_wid from the counter wid_next,
-- whatever inserts the row; an upsert that updates an existing record
-- keeps its wid (the trigger sets only a NULL one). events.wid is set by
-- the insert from the record's (store.insertEvent): it is never NULL while
-- the record exists, which the foreign key on runtime_id requires.

ALTER TABLE workloads ADD COLUMN wid INTEGER;
UPDATE workloads SET wid = n.rn FROM
	(SELECT runtime_id, row_number() OVER (ORDER BY runtime_id) AS rn FROM workloads) AS n
	WHERE workloads.runtime_id = n.runtime_id;

CREATE TABLE wid_next (n INTEGER NOT NULL);
INSERT INTO wid_next (n) SELECT COALESCE(MAX(wid), 0) FROM workloads;

CREATE TRIGGER workloads_wid AFTER INSERT ON workloads WHEN NEW.wid IS NULL
BEGIN
	UPDATE wid_next SET n = n + 1
		WHERE (SELECT wid FROM workloads WHERE runtime_id = NEW.runtime_id) IS NULL;
	UPDATE workloads SET wid = (SELECT n FROM wid_next)
		WHERE runtime_id = NEW.runtime_id AND wid IS NULL;
END;

ALTER TABLE events ADD COLUMN wid INTEGER;
UPDATE events SET wid = (SELECT w.wid FROM workloads w WHERE w.runtime_id = events.runtime_id);

DROP INDEX events_key;
CREATE UNIQUE INDEX events_key ON events (wid, epoch,
	(CASE WHEN observed = 1 AND type != 'ContainerWaiting' THEN type END),
	(CASE WHEN observed = 1 AND type != 'ContainerWaiting' THEN uid END));
