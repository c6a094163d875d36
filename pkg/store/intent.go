package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrSuperseded is returned by the intent methods when the record has moved
// to a later epoch (another request) since the intent was recorded: the
// caller must leave it alone.
var ErrSuperseded = errors.New("the record was changed by a later request")

// SetObjectUID records the UID of the object a request made (a workload
// created, a job created again) on the record and on the requested events of
// epoch that did not know it, and msg as the record's message when not
// empty, provided the record is still at epoch and knows no UID yet (or
// already this one). A record that moved on, or that a monitor has given
// another UID, is left alone (ok false).
func (s *Store) SetObjectUID(ctx context.Context, runtimeID string, epoch int, uid, msg string) (ok bool, err error) {
	now := s.now().UTC()
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE workloads SET uid = ?, message = CASE WHEN ? = '' THEN message ELSE ? END, updated_at = ?
	WHERE runtime_id = ? AND epoch = ? AND uid IN ('', ?)`,
			uid, msg, msg, toDB(now), runtimeID, epoch, uid)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		ok = true
		// The request of this epoch made the object: its event names it.
		_, err = tx.ExecContext(ctx, `WITH RECURSIVE chain(seq) AS (
	SELECT last_seq FROM workloads WHERE runtime_id = ?2 AND last_seq != 0
	UNION ALL
	SELECT e.prev FROM chain c JOIN events e ON e.seq = c.seq WHERE e.prev != 0 AND e.epoch >= ?3)
UPDATE events SET uid = ?1 WHERE seq IN (SELECT seq FROM chain) AND epoch = ?3 AND observed = 0 AND uid = ''`, uid, runtimeID, epoch)
		return err
	})
	if err != nil {
		return false, s.fail(fmt.Sprintf("set UID of %q", runtimeID), err)
	}
	return ok, nil
}

// Forget removes a record that only ever held an intent: a create whose API
// call failed, for an ID the database did not know before. It is removed,
// with its history and lease, only while it is still at epoch; otherwise
// ErrSuperseded.
func (s *Store) Forget(ctx context.Context, runtimeID string, epoch int) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var cur int
		err := tx.QueryRowContext(ctx, "SELECT epoch FROM workloads WHERE runtime_id = ?", runtimeID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur != epoch {
			return ErrSuperseded
		}
		for _, q := range []string{
			fmt.Sprintf(chainOf, "?") + "DELETE FROM events WHERE seq IN (SELECT seq FROM chain)",
			"DELETE FROM leases WHERE runtime_id = ?",
			"DELETE FROM workloads WHERE runtime_id = ?",
		} {
			if _, err := tx.ExecContext(ctx, q, runtimeID); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrSuperseded) {
		return err
	}
	if err != nil {
		return s.fail(fmt.Sprintf("forget %q", runtimeID), err)
	}
	return nil
}

// Restore puts back old, the record as it was before a create that failed
// (the ID was known: deleted or exited before), while the record is still at
// epoch, and appends RequestFailed with msg. The epoch stays where the
// intent took it, so observations made for the failed request stay apart.
func (s *Store) Restore(ctx context.Context, old Workload, epoch int, msg string) error {
	specJSON, err := json.Marshal(old.Spec)
	if err != nil {
		return fmt.Errorf("restore %q: encode spec: %w", old.RuntimeID, err)
	}
	now := s.now().UTC()
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE workloads SET uid = ?, spec = ?, state = ?, message = ?, request = ?, expect = ?,
	created_at = ?, updated_at = ?, reason = ?, exit_code = ?, started_at = ?, finished_at = ? WHERE runtime_id = ? AND epoch = ?`,
			old.UID, string(specJSON), string(old.State), old.Message, string(old.Request), string(old.Expect),
			toDB(old.CreatedAt), toDB(now), old.Reason, nullInt(old.ExitCode), nullTime(old.StartedAt), nullTime(old.FinishedAt),
			old.RuntimeID, epoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrSuperseded
		}
		h, err := readHead(ctx, tx, old.RuntimeID)
		if err != nil {
			return err
		}
		seq, err := appendEvent(ctx, tx, h.last, old.RuntimeID, string(RequestFailed), msg, old.UID, epoch, false, toDB(now),
			"", nil, nil, nil)
		if err != nil {
			return err
		}
		h.recorded(seq, epoch, RequestFailed, old.UID, false)
		return h.write(ctx, tx, old.RuntimeID)
	})
	if errors.Is(err, ErrSuperseded) {
		return err
	}
	if err != nil {
		return s.fail(fmt.Sprintf("restore %q", old.RuntimeID), err)
	}
	return nil
}

// UnconfirmedDeletes returns the deleted records whose deletion no
// observation has confirmed yet (no ContainerDeleted in their epoch),
// without their specs, in the order of List. A process that
// died between recording a delete and making its API call leaves such a
// record while the object lives on; recover reads their objects
// (lifecycle.Engine.Recover) and confirms those that are gone.
func (s *Store) UnconfirmedDeletes(ctx context.Context) ([]Workload, error) {
	cols := strings.Replace(workloadColumns, "spec,", "'' AS spec,", 1)
	rows, err := s.db.QueryContext(ctx, "SELECT "+cols+` FROM workloads w
WHERE w.state = ? AND NOT EXISTS (WITH RECURSIVE chain(seq) AS (
		SELECT w.last_seq WHERE w.last_seq != 0
		UNION ALL
		SELECT e.prev FROM chain c JOIN events e ON e.seq = c.seq WHERE e.prev != 0 AND e.epoch >= w.epoch)
	SELECT 1 FROM chain c JOIN events e ON e.seq = c.seq WHERE e.epoch = w.epoch AND e.type = ?)
ORDER BY namespace, kind, name, runtime_id`, string(StateDeleted), string(ContainerDeleted))
	if err != nil {
		return nil, s.fail("list unconfirmed deletes", err)
	}
	defer rows.Close()
	ws := []Workload{}
	for rows.Next() {
		var spec []byte
		w, err := scanRow(rows.Scan, &spec)
		if err != nil {
			return nil, s.fail("list unconfirmed deletes", err)
		}
		ws = append(ws, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list unconfirmed deletes", err)
	}
	return ws, nil
}
