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
	// Two statements whatever the number of IDs (one JSON array each, see
	// ReleaseLeases): the leases held now, then one upsert of those taken.
	// recover --once takes a lease per record, a batch at a time; a read
	// and a write per ID were a sixth of its CPU.
	list, err := jsonIDs(ids)
	if err != nil {
		return nil, err
	}
	var out []string
	err = s.write(ctx, func(tx *sql.Tx) error {
		now := s.now().UTC()
		rows, err := tx.QueryContext(ctx, "SELECT runtime_id, owner, pid, host, heartbeat FROM leases WHERE runtime_id IN (SELECT value FROM json_each(?))", list)
		if err != nil {
			return err
		}
		held := map[string]bool{} // by a live owner other than o
		for rows.Next() {
			var id string
			var holder Owner
			var beat int64
			if err := rows.Scan(&id, &holder.ID, &holder.PID, &holder.Host, &beat); err != nil {
				rows.Close()
				return err
			}
			switch {
			case holder.ID == o.ID:
			case now.Sub(fromDB(beat)) > ttl:
			case s.host != "" && holder.Host == s.host && holder.PID > 0 && !processAlive(holder.PID):
			default:
				held[id] = true
			}
		}
		err = rows.Err()
		rows.Close()
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
		out = acquired
		return nil
	})
	if err != nil {
		return nil, s.fail("acquire leases", err)
	}
	return out, nil
}

// renewChunk bounds the leases one transaction of RenewLeases renews. A
// monitor of 100,000 IDs renews them every 5 s; in one UPDATE that held the
// write lock about 0.4 s on a loaded machine, and the monitor's writer, whose
// batches need the same lock, waited for it: the tail of its event-to-line
// latency. Between chunks the writer gets its turn.
var renewChunk = 2048

// RenewLeases sets the heartbeat of all of o's leases to now, renewChunk
// leases a transaction (in rowid order, a range of the owner index each).
func (s *Store) RenewLeases(ctx context.Context, o Owner) error {
	if err := o.validate(); err != nil {
		return err
	}
	now := toDB(s.now().UTC())
	var after int64 = -1 << 63
	for {
		var last sql.NullInt64
		err := s.write(ctx, func(tx *sql.Tx) error {
			if err := tx.QueryRowContext(ctx, "SELECT max(rowid) FROM (SELECT rowid FROM leases WHERE owner = ? AND rowid > ? ORDER BY rowid LIMIT ?)",
				o.ID, after, renewChunk).Scan(&last); err != nil || !last.Valid {
				return err
			}
			_, err := tx.ExecContext(ctx, "UPDATE leases SET heartbeat = ? WHERE owner = ? AND rowid > ? AND rowid <= ?", now, o.ID, after, last.Int64)
			return err
		})
		if err != nil {
			return s.fail("renew leases", err)
		}
		if !last.Valid {
			return nil
		}
		after = last.Int64
	}
}

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
		q += " AND runtime_id IN (SELECT value FROM json_each(?))"
		args = append(args, list)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return s.fail("release leases", err)
	}
	return nil
}

// LeaseHolder returns the owner of the lease of id and its last heartbeat;
// ok is false when nobody holds it. The lease may be stale.
func (s *Store) LeaseHolder(ctx context.Context, id string) (o Owner, heartbeat time.Time, ok bool, err error) {
	var beat int64
	err = s.db.QueryRowContext(ctx, "SELECT owner, pid, host, heartbeat FROM leases WHERE runtime_id = ?", id).
		Scan(&o.ID, &o.PID, &o.Host, &beat)
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
