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
	var out []string
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.now().UTC()
		get, err := tx.PrepareContext(ctx, "SELECT owner, pid, host, heartbeat FROM leases WHERE runtime_id = ?")
		if err != nil {
			return err
		}
		defer get.Close()
		put, err := tx.PrepareContext(ctx, `
INSERT INTO leases (runtime_id, owner, pid, host, heartbeat) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (runtime_id) DO UPDATE SET
	owner = excluded.owner, pid = excluded.pid, host = excluded.host, heartbeat = excluded.heartbeat`)
		if err != nil {
			return err
		}
		defer put.Close()

		acquired := []string{}
		seen := make(map[string]bool, len(ids))
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			var holder Owner
			var beat int64
			err := get.QueryRowContext(ctx, id).Scan(&holder.ID, &holder.PID, &holder.Host, &beat)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			case holder.ID == o.ID:
			case now.Sub(fromDB(beat)) > ttl:
			case s.host != "" && holder.Host == s.host && holder.PID > 0 && !processAlive(holder.PID):
			default:
				continue // a live owner holds it
			}
			if _, err := put.ExecContext(ctx, id, o.ID, o.PID, o.Host, toDB(now)); err != nil {
				return err
			}
			acquired = append(acquired, id)
		}
		out = acquired
		return nil
	})
	if err != nil {
		return nil, s.fail("acquire leases", err)
	}
	return out, nil
}

// RenewLeases sets the heartbeat of all of o's leases to now.
func (s *Store) RenewLeases(ctx context.Context, o Owner) error {
	if err := o.validate(); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE leases SET heartbeat = ? WHERE owner = ?", toDB(s.now().UTC()), o.ID)
		return err
	})
	if err != nil {
		return s.fail("renew leases", err)
	}
	return nil
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
