package store

import "context"

// PrepareWrites prepares the statements of ApplyFree and ApplyBatch (the
// records' read, the leases' read, the event insert and the record
// updates) now, on a connection the store has open and idle, for a writer
// that has time before its first batch: a pass calls it while its streams
// wait for the API server's first answer.
//
// Prepared inside a write transaction instead, each statement was parsed
// twice, and on a second connection opened for it: the store prepares a
// statement on whatever connection of the pool is free (Store.stmt), and
// the transaction holds the first one, on which sql.Tx.StmtContext
// prepares it again. That was about 5 ms of recover --once's writer at
// 1,000 workloads (pprof, 30 runs), on its critical path. A statement
// prepared here is reused by every later transaction on the same
// connection; one that runs on another connection prepares it there, as
// before.
func (s *Store) PrepareWrites(ctx context.Context) error {
	for _, v := range [][2]bool{{false, true}, {false, false}} {
		if _, err := s.readRecords(ctx, v[0], v[1]); err != nil {
			return s.fail("prepare", err)
		}
	}
	qs := []string{insertEventQuery, heldByOthersQuery}
	for _, size := range updateSizes {
		qs = append(qs, updateQueries[size])
	}
	for _, q := range qs {
		if _, err := s.stmt(ctx, q); err != nil {
			return s.fail("prepare", err)
		}
	}
	return nil
}
