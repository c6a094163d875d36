package store

import "context"

// CheckpointResult is what one Checkpoint did, in WAL frames (pages).
type CheckpointResult struct {
	// Busy: the checkpoint could not run (another one held its lock).
	Busy bool
	// Log is the frames in the WAL, Checkpointed those now in the
	// database file (-1 both when the file is not in WAL mode).
	Log, Checkpointed int
}

// Checkpoint copies into the database file what it can of the WAL without
// waiting for anyone (PRAGMA wal_checkpoint(PASSIVE)), on a connection of
// the pool, not under the store's write lock: a writer of this or another
// process commits meanwhile. When everything was copied, the next write
// transaction starts the WAL over from its beginning.
//
// A process that writes often (the monitor) calls it in the background so
// that the WAL stays short: SQLite's automatic checkpoint (every
// wal_autocheckpoint frames of WAL, dataSourceName) runs inside the commit
// that crosses the limit, on the writer's path, and a checkpoint of 7,000
// pages of a 110 MB database took 0.48 s (sqlite3, fsyncs included), which
// the writer's batch and every observation queued behind it waited for.
func (s *Store) Checkpoint(ctx context.Context) (CheckpointResult, error) {
	var busy, log, done int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done); err != nil {
		return CheckpointResult{}, s.fail("checkpoint", err)
	}
	return CheckpointResult{Busy: busy != 0, Log: log, Checkpointed: done}, nil
}
