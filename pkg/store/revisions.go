package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// Revision is one spec a record has had. Revisions are numbered from 1
// without gaps, oldest first.
type Revision struct {
	RuntimeID string
	Revision  int
	Spec      spec.ContainerSpec
	// Change says what the revision changed ("image nginx:1.27 → nginx:1.28",
	// "back to revision 1: …"); "created" for the spec a record was made with.
	Change string
	// Epoch is the request that recorded it (its SpecUpdated event's); 0
	// for the spec a record was made with.
	Epoch     int
	CreatedAt time.Time
}

// Change texts of the revision that holds the spec a record was made with.
const (
	ChangeCreated      = "created"
	ChangeCreatedAgain = "created again"
)

// Revisions returns the specs runtimeID has had, oldest first. The current
// spec of a record with no revision row for it yet (made before schema 5, or
// made again after a deletion, and not updated since) is the last one,
// numbered after the rows. An unknown runtime ID is an error wrapping
// ErrNotFound.
func (s *Store) Revisions(ctx context.Context, runtimeID string) ([]Revision, error) {
	out, err := revisions(ctx, s.db, runtimeID)
	var nf *notFoundError
	if errors.As(err, &nf) {
		return nil, err
	}
	if err != nil {
		return nil, s.fail(fmt.Sprintf("read the revisions of %q", runtimeID), err)
	}
	return out, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// revisions reads the rows of runtimeID and adds its current spec when no
// row holds it (see Revisions).
func revisions(ctx context.Context, tx querier, runtimeID string) ([]Revision, error) {
	var (
		cur     []byte
		created int64
	)
	err := tx.QueryRowContext(ctx, "SELECT spec, created_at FROM workloads WHERE runtime_id = ?", runtimeID).Scan(&cur, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &notFoundError{id: runtimeID}
	}
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT revision, spec, change, epoch, created_at FROM revisions WHERE runtime_id = ? ORDER BY revision", runtimeID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out  []Revision
		last []byte
	)
	for rows.Next() {
		r := Revision{RuntimeID: runtimeID}
		var raw []byte
		var at int64
		if err := rows.Scan(&r.Revision, &raw, &r.Change, &r.Epoch, &at); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &r.Spec); err != nil {
			return nil, fmt.Errorf("decode revision %d of %q: %w", r.Revision, runtimeID, err)
		}
		r.CreatedAt = fromDB(at)
		out = append(out, r)
		last = raw
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if last != nil && sameSpecJSON(last, cur) {
		return out, nil
	}
	base := Revision{RuntimeID: runtimeID, Revision: len(out) + 1, Change: ChangeCreated, CreatedAt: fromDB(created)}
	if len(out) > 0 {
		base.Change = ChangeCreatedAgain
	}
	if err := json.Unmarshal(cur, &base.Spec); err != nil {
		return nil, fmt.Errorf("decode the spec of %q: %w", runtimeID, err)
	}
	return append(out, base), nil
}

// sameSpecJSON compares two stored specs by their decoded form, so that an
// older encoding of the same spec is the same.
func sameSpecJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var sa, sb spec.ContainerSpec
	if json.Unmarshal(a, &sa) != nil || json.Unmarshal(b, &sb) != nil {
		return false
	}
	ja, _ := json.Marshal(sa)
	jb, _ := json.Marshal(sb)
	return bytes.Equal(ja, jb)
}

// SameSpec reports whether a and b are the same spec as the store keeps it.
func SameSpec(a, b spec.ContainerSpec) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// UpdateSpec records t, a SpecUpdated transition, and makes next the
// record's spec, in one transaction: the current spec is first written as
// a revision when no row holds it yet, then next as the following one with
// change, under t's epoch. When next is the current spec (an update sent
// again because the cluster does not have it) only the event is recorded.
// It returns what the transition did and the revision that holds next. An
// unknown runtime ID is an error wrapping ErrNotFound.
func (s *Store) UpdateSpec(ctx context.Context, t Transition, next spec.ContainerSpec, change string) (Applied, Revision, error) {
	if t.Type != SpecUpdated {
		return Applied{}, Revision{}, fmt.Errorf("update the spec of %q: the event is %s, not %s", t.RuntimeID, t.Type, SpecUpdated)
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return Applied{}, Revision{}, fmt.Errorf("update the spec of %q: encode it: %w", t.RuntimeID, err)
	}
	var (
		applied Applied
		rev     Revision
	)
	err = s.write(ctx, func(tx *sql.Tx) error {
		revs, err := revisions(ctx, tx, t.RuntimeID)
		if err != nil {
			return err
		}
		now := s.now().UTC()
		res, err := s.applyOne(ctx, tx, t, now, true)
		if err != nil {
			return err
		}
		applied = res
		cur := revs[len(revs)-1]
		if SameSpec(cur.Spec, next) {
			rev = cur // sent again: no new revision
			return nil
		}
		insert := "INSERT INTO revisions (runtime_id, revision, spec, change, epoch, created_at) VALUES (?, ?, ?, ?, ?, ?)"
		if !rowExists(ctx, tx, t.RuntimeID, cur.Revision) {
			curRaw, err := json.Marshal(cur.Spec)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, insert, t.RuntimeID, cur.Revision, string(curRaw), cur.Change, 0, toDB(cur.CreatedAt)); err != nil {
				return err
			}
		}
		rev = Revision{RuntimeID: t.RuntimeID, Revision: cur.Revision + 1, Spec: next, Change: change, Epoch: res.Workload.Epoch, CreatedAt: now}
		if _, err := tx.ExecContext(ctx, insert, t.RuntimeID, rev.Revision, string(raw), change, rev.Epoch, toDB(now)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE workloads SET spec = ? WHERE runtime_id = ?", string(raw), t.RuntimeID)
		if err == nil {
			applied.Workload.Spec = next
		}
		return err
	})
	var nf *notFoundError
	if errors.As(err, &nf) {
		return Applied{}, Revision{}, err
	}
	if err != nil {
		return Applied{}, Revision{}, s.fail(fmt.Sprintf("update the spec of %q", t.RuntimeID), err)
	}
	return applied, rev, nil
}

// applyOne applies t in tx at now, as ApplyBatch does a batch of one (see
// applyTx for specs).
func (s *Store) applyOne(ctx context.Context, tx *sql.Tx, t Transition, now time.Time, specs bool) (Applied, error) {
	res, err := s.applyTx(ctx, tx, []Transition{t}, now, specs)
	if err != nil {
		return Applied{}, err
	}
	return res[0], nil
}

func rowExists(ctx context.Context, tx *sql.Tx, runtimeID string, revision int) bool {
	var ok bool
	err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM revisions WHERE runtime_id = ? AND revision = ?)", runtimeID, revision).Scan(&ok)
	return err == nil && ok
}

// RevertSpec records t, the RequestFailed of the update made at epoch,
// and takes back the revision that update wrote, in one transaction: the
// cluster refused the new spec, so the record keeps the one it had. A
// revision of a later request is left alone (ErrSuperseded is not
// returned: t is recorded as a RequestFailed of an older epoch would be).
func (s *Store) RevertSpec(ctx context.Context, t Transition, epoch int) error {
	if t.Type != RequestFailed {
		return fmt.Errorf("revert the spec of %q: the event is %s, not %s", t.RuntimeID, t.Type, RequestFailed)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.applyOne(ctx, tx, t, s.now().UTC(), false)
		if err != nil {
			return err
		}
		if res.Workload.Epoch != epoch {
			return nil // a later request owns the record and its spec
		}
		var last, lastEpoch int
		err = tx.QueryRowContext(ctx, "SELECT revision, epoch FROM revisions WHERE runtime_id = ? ORDER BY revision DESC LIMIT 1", t.RuntimeID).Scan(&last, &lastEpoch)
		if errors.Is(err, sql.ErrNoRows) || err == nil && lastEpoch != epoch {
			return nil // the update wrote no revision (sent again)
		}
		if err != nil {
			return err
		}
		var prev []byte
		if err := tx.QueryRowContext(ctx, "SELECT spec FROM revisions WHERE runtime_id = ? AND revision = ?", t.RuntimeID, last-1).Scan(&prev); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM revisions WHERE runtime_id = ? AND revision = ?", t.RuntimeID, last); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE workloads SET spec = ? WHERE runtime_id = ?", string(prev), t.RuntimeID)
		return err
	})
	var nf *notFoundError
	if errors.As(err, &nf) {
		return err
	}
	if err != nil {
		return s.fail(fmt.Sprintf("revert the spec of %q", t.RuntimeID), err)
	}
	return nil
}
