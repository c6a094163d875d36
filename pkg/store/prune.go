package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// Pruned is a record Prune removed, or would remove.
type Pruned struct {
	RuntimeID string
	// DeletedAt is when the record last changed: when it became deleted.
	DeletedAt time.Time
	// Events is how many events of its history went with it.
	Events int
}

// PruneFilter says which deleted records Prune removes.
type PruneFilter struct {
	// Before: only records that last changed (became deleted) at or before
	// it; any when zero.
	Before time.Time
	// Namespace and Runtime, when set, keep the others.
	Namespace, Runtime string
	// DryRun removes nothing: Prune returns what it would remove.
	DryRun bool
}

// Prune removes the records in state deleted that f selects, with their
// history, cluster identity and leases, and returns them sorted by runtime
// ID.
//
// It never removes a record in another state: the selection and the
// deletes run in one write transaction (BEGIN IMMEDIATE), so no other
// process can record anything in between, and every DELETE checks the
// state again. A record created again under a deleted one's runtime ID
// (create of the same name) is no longer deleted and stays. The cluster is
// never asked: a deleted record's objects are gone, as the monitor saw.
func (s *Store) Prune(ctx context.Context, f PruneFilter) ([]Pruned, error) {
	cutoff := int64(1<<63 - 1)
	if !f.Before.IsZero() {
		cutoff = toDB(f.Before)
	}
	sel := `SELECT w.runtime_id, w.updated_at,
	(WITH RECURSIVE chain(seq) AS (
		SELECT w.last_seq WHERE w.last_seq != 0
		UNION ALL
		SELECT e.prev FROM chain c JOIN events e ON e.seq = c.seq WHERE e.prev != 0)
	SELECT COUNT(*) FROM chain)
FROM workloads w WHERE w.state = ? AND w.updated_at <= ?`
	selArgs := []any{string(StateDeleted), cutoff}
	if f.Namespace != "" {
		sel += " AND w.namespace = ?"
		selArgs = append(selArgs, f.Namespace)
	}
	if f.Runtime != "" {
		sel += " AND w.runtime = ?"
		selArgs = append(selArgs, f.Runtime)
	}
	sel += " ORDER BY w.runtime_id"
	dryRun := f.DryRun
	collect := func(q interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}) ([]Pruned, error) {
		rows, err := q.QueryContext(ctx, sel, selArgs...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []Pruned
		for rows.Next() {
			var p Pruned
			var t int64
			if err := rows.Scan(&p.RuntimeID, &t, &p.Events); err != nil {
				return nil, err
			}
			p.DeletedAt = fromDB(t)
			out = append(out, p)
		}
		return out, rows.Err()
	}
	if dryRun {
		out, err := collect(s.db)
		if err != nil {
			return nil, s.fail("list deleted records", err)
		}
		return out, nil
	}
	var out []Pruned
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = collect(tx); err != nil {
			return err
		}
		for chunk := range slices.Chunk(out, 400) {
			args := []any{string(StateDeleted), cutoff}
			for _, p := range chunk {
				args = append(args, p.RuntimeID)
			}
			// Only IDs that are still deleted: the subquery reads the
			// record in this transaction.
			stillIDs := "SELECT runtime_id FROM workloads WHERE state = ? AND updated_at <= ? AND runtime_id IN (" + placeholders(len(chunk)) + ")"
			still := "runtime_id IN (" + stillIDs + ")"
			// The events by their records' chains (schema 9: no index
			// on events but the seq), before the records go.
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(chainOf, stillIDs)+"DELETE FROM events WHERE seq IN (SELECT seq FROM chain)", args...); err != nil {
				return err
			}
			for _, table := range []string{"leases", "clusters", "workloads"} {
				if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE "+still, args...); err != nil {
					return err
				}
			}
		}
		if len(out) > 0 {
			// The owners of the leases removed may hold no other.
			if _, err := tx.ExecContext(ctx, pruneOwnersQuery); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("prune deleted records", err)
	}
	return out, nil
}
