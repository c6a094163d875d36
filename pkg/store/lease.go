package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// AcquireLeases takes, in one transaction, the leases of ids that are free,
// already held by o, held by an owner whose heartbeat is older than ttl, or
// held by an owner on this host whose process is gone. It returns the IDs o
// holds afterwards, in the order given; the others stay with a live owner.
func (s *Store) AcquireLeases(ctx context.Context, o Owner, ids []string, ttl time.Duration) ([]string, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return []string{}, nil
	}
	// Three statements whatever the number of IDs (one JSON array each, see
	// ReleaseLeases): the leases held now, one upsert of those taken, and
	// one of o's row of lease_owners.
	// recover --once takes a lease per record, a batch at a time; a read
	// and a write per ID were a sixth of its CPU.
	list, err := jsonIDs(ids)
	if err != nil {
		return nil, err
	}
	var out []string
	err = s.write(ctx, func(tx *sql.Tx) error {
		now := s.now().UTC()
		held, _, err := s.heldByOthers(ctx, tx, o, list, ttl, now)
		if err != nil {
			return err
		}
		acquired := make([]string, 0, len(ids))
		seen := make(map[string]bool, len(ids))
		for _, id := range ids {
			if !seen[id] && !held[id] {
				acquired = append(acquired, id)
			}
			seen[id] = true
		}
		if len(acquired) == 0 {
			out = acquired
			return nil
		}
		take, err := jsonIDs(acquired)
		if err != nil {
			return err
		}
		// "WHERE true": an upsert's SELECT needs a WHERE clause (SQLite's
		// parsing ambiguity with ON).
		if _, err := tx.ExecContext(ctx, `
INSERT INTO leases (runtime_id, owner, pid, host, heartbeat) SELECT value, ?, ?, ?, ? FROM json_each(?) WHERE true
ON CONFLICT (runtime_id) DO UPDATE SET
	owner = excluded.owner, pid = excluded.pid, host = excluded.host, heartbeat = excluded.heartbeat`,
			o.ID, o.PID, o.Host, toDB(now), take); err != nil {
			return err
		}
		if err := upsertOwner(ctx, tx, o, now, false); err != nil {
			return err
		}
		out = acquired
		return nil
	})
	if err != nil {
		return nil, s.fail("acquire leases", err)
	}
	return out, nil
}

// leaseColumns are the columns of a lease (alias l) and its heartbeat: the
// later of the lease's (the time it was acquired, or renewed by a binary of
// schema 7 or older) and its owner's (alias lo, a LEFT JOIN of lease_owners
// on the owner). An owner renews one row, not one per lease (RenewLeases).
const leaseColumns = "l.runtime_id, l.owner, l.pid, l.host, max(l.heartbeat, coalesce(lo.heartbeat, l.heartbeat))"

// leaseFrom is the FROM clause of leaseColumns.
const leaseFrom = " FROM leases AS l LEFT JOIN lease_owners AS lo ON lo.owner = l.owner "

// heldByOthersQuery reads the leases of the IDs of a JSON array.
const heldByOthersQuery = "SELECT " + leaseColumns + leaseFrom + "WHERE l.runtime_id IN (SELECT value FROM json_each(?))"

// heldByOthers reads, in tx, the leases of the IDs of list (a JSON array):
// held are those a live owner other than o holds; present, every ID that
// has a lease row.
func (s *Store) heldByOthers(ctx context.Context, tx *sql.Tx, o Owner, list string, ttl time.Duration, now time.Time) (held, present map[string]bool, err error) {
	st, err := s.stmt(ctx, heldByOthersQuery)
	if err != nil {
		return nil, nil, err
	}
	txst := tx.StmtContext(ctx, st)
	defer txst.Close()
	rows, err := txst.QueryContext(ctx, list)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	held, present = map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var id string
		var holder Owner
		var beat int64
		if err := rows.Scan(&id, &holder.ID, &holder.PID, &holder.Host, &beat); err != nil {
			return nil, nil, err
		}
		present[id] = true
		switch {
		case holder.ID == o.ID:
		case now.Sub(fromDB(beat)) > ttl:
		case s.host != "" && holder.Host == s.host && holder.PID > 0 && !processAlive(holder.PID):
		default:
			held[id] = true
		}
	}
	return held, present, rows.Err()
}

// FreeBatch is what ApplyFree records of the IDs no live process holds.
type FreeBatch struct {
	// UIDs are (runtime ID, object UID) pairs set as SetUID does, before
	// the transitions; a record that is gone is skipped.
	UIDs [][2]string
	// Transitions are applied as ApplyBatchNoSpecs applies them.
	Transitions []Transition
}

// ApplyFree reads the heads of the records of ids (as Heads), then does
// AcquireLeases of those live says to record, SetUID and ApplyBatchNoSpecs
// of what build makes of the IDs taken (free), then ReleaseLeases of them,
// in one write transaction instead of three or more: the write lock held
// from BEGIN IMMEDIATE to the commit keeps every other process out for as
// long as the leases would have, and the leases left behind are the same
// (the taken ones, stale or o's, are removed; those of live owners stay).
// The records are read once, in the transaction, and the transitions
// applied to them as read: the heads cannot change before they are applied.
// live and build may be called more than once (a busy database is tried
// again) and must make the same batch from the same heads and IDs. The
// transaction is all or nothing: on a transition of an ID without a record
// it records nothing and returns an error wrapping ErrNotFound.
//
// recover --once records each batch of streamed objects with it: the two
// lease transactions were two of every three commits of the pass, and the
// heads read before it a second read of every record.
func (s *Store) ApplyFree(ctx context.Context, o Owner, ids []string, ttl time.Duration, live func(id string, h Head) bool,
	build func(heads map[string]Head, free []string) FreeBatch) (heads map[string]Head, free []string, res []Applied, err error) {
	if err := o.validate(); err != nil {
		return nil, nil, nil, err
	}
	if len(ids) == 0 {
		return map[string]Head{}, []string{}, []Applied{}, nil
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		now := s.now().UTC()
		uniq := make([]string, 0, len(ids))
		seen := make(map[string]bool, len(ids))
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				uniq = append(uniq, id)
			}
		}
		rb, err := s.readBatch(ctx, tx, uniq, false, true)
		if err != nil {
			return err
		}
		heads = make(map[string]Head, len(rb.recs))
		var cand []string
		for _, id := range uniq {
			w := rb.recs[id]
			if w == nil {
				continue
			}
			h := Head{State: w.State, UID: w.UID, UpdatedAt: w.UpdatedAt, Cluster: rb.clusters[id]}
			heads[id] = h
			if live(id, h) {
				cand = append(cand, id)
			}
		}
		free = make([]string, 0, len(cand))
		res = []Applied{}
		if len(cand) == 0 {
			return nil
		}
		list, err := jsonIDs(cand)
		if err != nil {
			return err
		}
		held, present, err := s.heldByOthers(ctx, tx, o, list, ttl, now)
		if err != nil {
			return err
		}
		var drop []string // the leases taken, to remove as a release would
		for _, id := range cand {
			if !held[id] {
				free = append(free, id)
				if present[id] {
					drop = append(drop, id)
				}
			}
		}
		if len(drop) > 0 {
			l, err := jsonIDs(drop)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM leases WHERE runtime_id IN (SELECT value FROM json_each(?))", l); err != nil {
				return err
			}
		}
		b := build(heads, free)
		for _, t := range b.Transitions {
			if t.RuntimeID == "" {
				return errors.New("apply: empty runtime ID")
			}
			if !t.Type.known() {
				return fmt.Errorf("apply %s to %q: unknown event type", t.Type, t.RuntimeID)
			}
		}
		if len(b.UIDs) == 0 && len(b.Transitions) == 0 {
			return nil
		}
		a, err := rb.applier(ctx, s, tx, b.Transitions)
		if err != nil {
			return err
		}
		defer a.close()
		for _, p := range b.UIDs {
			a.setUID(p[0], p[1], now)
		}
		res, err = a.run(ctx, b.Transitions, now)
		return err
	})
	if err != nil {
		return nil, nil, nil, s.fail("apply events", err)
	}
	return heads, free, res, nil
}

// RenewLeases tells that o is alive: it sets the heartbeat of o's row of
// lease_owners to now, which every lease of o counts as its own
// (leaseColumns). It writes that one row however many leases o holds, and
// nothing when o holds none. It also removes the rows of owners that hold
// no lease any more (released, taken over, or their records pruned).
//
// It used to set the heartbeat of every lease of o: a monitor of 100,000 IDs
// rewrote them all every 5 s, 1,206 pages of WAL and ~90 ms of CPU a renewal
// (BenchmarkRenewLeases), in chunks of 2,048 rows between which the
// monitor's writer waited for the write lock.
//
// While a process of a binary of schema 7 or older holds a lease
// (olderOwnerQuery), o also sets the heartbeat of each of its own leases as
// that binary did: it reads leases.heartbeat alone, and would otherwise take
// o's leases over a TTL after they were acquired. This costs what a
// renewal cost before schema 8, and only while such a process runs (an
// upgrade with a monitor of the old binary still going).
func (s *Store) RenewLeases(ctx context.Context, o Owner) error {
	if err := o.validate(); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.now().UTC()
		if err := upsertOwner(ctx, tx, o, now, true); err != nil {
			return err
		}
		var older bool
		if err := tx.QueryRowContext(ctx, olderOwnerQuery, o.ID, toDB(now.Add(-olderOwnerWindow))).Scan(&older); err != nil {
			return err
		}
		if older {
			if _, err := tx.ExecContext(ctx, "UPDATE leases SET heartbeat = ? WHERE owner = ?", toDB(now), o.ID); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, pruneOwnersQuery)
		return err
	})
	if err != nil {
		return s.fail("renew leases", err)
	}
	return nil
}

// olderOwnerWindow is how recent a lease heartbeat of an older binary's
// process must be for RenewLeases to count that process as running: such a
// process renews every 5 s, so a minute without one means it is gone (its
// leases are then stale and taken over by anyone).
const olderOwnerWindow = time.Minute

// olderOwnerQuery tells whether an owner other than ?1 renews its leases as
// binaries of schema 7 and older do, with a lease heartbeat newer than ?2.
// A binary of schema 8 sets a lease's heartbeat only when it takes the
// lease, together with its owner row to the same time, and renews the row
// alone: its leases are never newer than its row. An older binary renews
// every lease and knows nothing of lease_owners: its leases are newer than
// its row (the one the migration made) or it has none. It renews all its
// leases each time, so the first of each owner tells.
//
// The owners are visited through the owner index (the next owner is the
// least one above the last): a few index searches per process holding
// leases, not a read of every lease.
const olderOwnerQuery = `
WITH RECURSIVE owners(o) AS (
	SELECT (SELECT min(owner) FROM leases)
	UNION ALL
	SELECT (SELECT min(owner) FROM leases WHERE owner > o) FROM owners WHERE o IS NOT NULL
)
SELECT EXISTS (SELECT 1 FROM owners WHERE o IS NOT NULL AND o != ?1
	AND (SELECT heartbeat FROM leases WHERE owner = o LIMIT 1) >
		max(?2, coalesce((SELECT heartbeat FROM lease_owners WHERE owner = o), ?2)))`

// upsertOwner sets, in tx, o's row of lease_owners to heartbeat now; when
// ifLeases, only if o holds a lease.
func upsertOwner(ctx context.Context, tx *sql.Tx, o Owner, now time.Time, ifLeases bool) error {
	q := "INSERT INTO lease_owners (owner, pid, host, heartbeat) SELECT ?, ?, ?, ? WHERE true"
	args := []any{o.ID, o.PID, o.Host, toDB(now)}
	if ifLeases {
		q = "INSERT INTO lease_owners (owner, pid, host, heartbeat) SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM leases WHERE owner = ?)"
		args = append(args, o.ID)
	}
	_, err := tx.ExecContext(ctx, q+`
ON CONFLICT (owner) DO UPDATE SET pid = excluded.pid, host = excluded.host, heartbeat = excluded.heartbeat`, args...)
	return err
}

// pruneOwnersQuery removes the rows of lease_owners of owners without a
// lease: a process that dies leaves its row, and the leases taken over from
// it do not remove it. The table holds a row per process that holds leases,
// and each is looked up in the owner index of leases.
const pruneOwnersQuery = "DELETE FROM lease_owners WHERE NOT EXISTS (SELECT 1 FROM leases WHERE leases.owner = lease_owners.owner)"

// releaseIDsQuery deletes the leases of a JSON array of IDs held by an
// owner. It finds them by runtime_id (the primary key); "+owner" keeps
// SQLite from choosing the owner index instead, which it did: a release of
// one ID then read every lease of the owner (86 ms at 100,000 leases), in a
// write transaction that the monitor's writer waited for after each batch
// that finished an ID.
const releaseIDsQuery = "DELETE FROM leases WHERE runtime_id IN (SELECT value FROM json_each(?)) AND +owner = ?"

// ReleaseLeases gives up o's leases of ids, or all of o's leases when no ID
// is given. Leases held by other owners are left alone.
func (s *Store) ReleaseLeases(ctx context.Context, o Owner, ids ...string) error {
	if err := o.validate(); err != nil {
		return err
	}
	q := "DELETE FROM leases WHERE owner = ?"
	args := []any{o.ID}
	if len(ids) > 0 {
		// One JSON array, not a placeholder per ID: SQLite allows 32,766
		// variables, and recover --once at 100,000 records released them all.
		list, err := jsonIDs(ids)
		if err != nil {
			return err
		}
		q, args = releaseIDsQuery, []any{list, o.ID}
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		// o's row goes with its last lease.
		_, err := tx.ExecContext(ctx, "DELETE FROM lease_owners WHERE owner = ? AND NOT EXISTS (SELECT 1 FROM leases WHERE owner = ?)", o.ID, o.ID)
		return err
	})
	if err != nil {
		return s.fail("release leases", err)
	}
	return nil
}

// LeaseHolder returns the owner of the lease of id and its last heartbeat
// (the later of its acquisition and its owner's last renewal); ok is false
// when nobody holds it. The lease may be stale.
func (s *Store) LeaseHolder(ctx context.Context, id string) (o Owner, heartbeat time.Time, ok bool, err error) {
	var beat int64
	var rid string
	err = s.db.QueryRowContext(ctx, "SELECT "+leaseColumns+leaseFrom+"WHERE l.runtime_id = ?", id).
		Scan(&rid, &o.ID, &o.PID, &o.Host, &beat)
	if errors.Is(err, sql.ErrNoRows) {
		return Owner{}, time.Time{}, false, nil
	}
	if err != nil {
		return Owner{}, time.Time{}, false, s.fail(fmt.Sprintf("read the lease of %q", id), err)
	}
	return o, fromDB(beat), true, nil
}

func (o Owner) validate() error {
	if o.ID == "" {
		return errors.New("lease owner has an empty ID")
	}
	return nil
}
