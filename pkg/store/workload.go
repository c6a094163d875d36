package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

const workloadColumns = "runtime_id, runtime, namespace, kind, name, uid, spec, state, message, epoch, request, expect, created_at, updated_at, reason, exit_code, started_at, finished_at"

// eventColumns are the columns queryEvents reads.
const eventColumns = "seq, runtime_id, type, message, uid, time, reason, exit_code, started_at, finished_at"

// Put records w, or resets the record with the same runtime ID (a workload
// deleted and created again under the same name): the row takes w's UID,
// spec, state and message, Epoch becomes the old Epoch+1 (1 for a new record)
// and CreatedAt w.CreatedAt, or now when zero. The old events stay in the
// history. ev (normally Created; an empty Type means Created) is appended in
// the same transaction. w.State defaults to created and w.Message to
// ev.Message.
func (s *Store) Put(ctx context.Context, w Workload, ev Transition) error {
	return s.put(ctx, w, ev, true)
}

// ErrOtherUID is wrapped by PutAdopted's refusal to replace a record that
// knows another object.
var ErrOtherUID = errors.New("the record knows another object")

// OtherUIDError is PutAdopted's refusal: the record RuntimeID knows the
// object Recorded, not Found.
type OtherUIDError struct{ RuntimeID, Recorded, Found string }

func (e *OtherUIDError) Error() string {
	return fmt.Sprintf("%s already records another object (uid %s, this one is uid %s)", e.RuntimeID, e.Recorded, e.Found)
}

func (e *OtherUIDError) Unwrap() error { return ErrOtherUID }

// PutAdopted records w like Put, in one transaction with the check that
// a record of the same runtime ID knows no other object: when it has a UID
// and that is not w.UID, nothing is written and the error is an
// *OtherUIDError, unless replace is true.
func (s *Store) PutAdopted(ctx context.Context, w Workload, ev Transition, replace bool) error {
	return s.put(ctx, w, ev, replace)
}

func (s *Store) put(ctx context.Context, w Workload, ev Transition, replace bool) error {
	if w.RuntimeID == "" {
		return errors.New("put workload: empty runtime ID")
	}
	if ev.RuntimeID == "" {
		ev.RuntimeID = w.RuntimeID
	}
	if ev.RuntimeID != w.RuntimeID {
		return fmt.Errorf("put workload %q: event is for runtime ID %q", w.RuntimeID, ev.RuntimeID)
	}
	if ev.Type == "" {
		ev.Type = Created
	}
	if !ev.Type.known() {
		return fmt.Errorf("put workload %q: unknown event type %q", w.RuntimeID, ev.Type)
	}
	if w.State == "" {
		w.State = StateCreated
	}
	if !w.State.known() {
		return fmt.Errorf("put workload %q: unknown state %q", w.RuntimeID, w.State)
	}
	if w.Message == "" {
		w.Message = ev.Message
	}
	if ev.UID == "" {
		ev.UID = w.UID
	}
	specJSON, err := json.Marshal(w.Spec)
	if err != nil {
		return fmt.Errorf("put workload %q: encode spec: %w", w.RuntimeID, err)
	}
	now := s.now().UTC()
	created := w.CreatedAt
	if created.IsZero() {
		created = now
	}
	evTime := ev.Time
	if evTime.IsZero() {
		evTime = now
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if !replace {
			var uid string
			err := tx.QueryRowContext(ctx, "SELECT uid FROM workloads WHERE runtime_id = ?", w.RuntimeID).Scan(&uid)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			case uid != "" && uid != w.UID:
				return &OtherUIDError{RuntimeID: w.RuntimeID, Recorded: uid, Found: w.UID}
			}
		}
		var epoch int
		var last int64
		err := tx.QueryRowContext(ctx, `
INSERT INTO workloads (`+workloadColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, '', ?, ?, ?, ?, ?, ?)
ON CONFLICT (runtime_id) DO UPDATE SET
	runtime = excluded.runtime, namespace = excluded.namespace, kind = excluded.kind,
	name = excluded.name, uid = excluded.uid, spec = excluded.spec, state = excluded.state,
	message = excluded.message, epoch = workloads.epoch + 1, request = excluded.request, expect = '',
	created_at = excluded.created_at, updated_at = excluded.updated_at,
	reason = excluded.reason, exit_code = excluded.exit_code,
	started_at = excluded.started_at, finished_at = excluded.finished_at
RETURNING epoch, last_seq`,
			w.RuntimeID, w.Runtime, w.Namespace, w.Kind, w.Name, w.UID, string(specJSON),
			string(w.State), w.Message, string(ev.Type), toDB(created), toDB(now),
			w.Reason, nullInt(w.ExitCode), nullTime(w.StartedAt), nullTime(w.FinishedAt)).Scan(&epoch, &last)
		if err != nil {
			return err
		}
		// A new epoch: no event of it recorded before this one.
		once := onceBit(ev.Type) != 0
		seq, err := appendEvent(ctx, tx, last, ev.RuntimeID, string(ev.Type), ev.Message, ev.UID, epoch, once, toDB(evTime),
			ev.Reason, nullInt(ev.ExitCode), nullTime(ev.StartedAt), nullTime(ev.FinishedAt))
		if err != nil {
			return err
		}
		h := chainHead{last: last}
		h.recorded(seq, epoch, ev.Type, ev.UID, once)
		return h.write(ctx, tx, ev.RuntimeID)
	})
	var other *OtherUIDError
	if errors.As(err, &other) {
		return err
	}
	if err != nil {
		return s.fail(fmt.Sprintf("put workload %q", w.RuntimeID), err)
	}
	return nil
}

// insertEventQuery appends an event: its columns, then prev, the seq of
// the record's event before it (schema 9: the record's last_seq, 0 for
// none). The once-per-object-and-epoch rule is the writer's (chainHead.has).
const insertEventQuery = "INSERT INTO events (runtime_id, type, message, uid, epoch, observed, time, reason, exit_code, started_at, finished_at, prev) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// appendEvent inserts an event (the columns of insertEventQuery but prev)
// after the record's last event last, in tx, and returns its seq. The
// caller writes the record's new chain head (chainHead.write) unless it
// writes the record itself.
func appendEvent(ctx context.Context, tx *sql.Tx, last int64, cols ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, insertEventQuery, append(cols, last)...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// write stores h as the chain head of the record id in tx.
func (h chainHead) write(ctx context.Context, tx *sql.Tx, id string) error {
	res, err := tx.ExecContext(ctx, "UPDATE workloads SET last_seq = ?, once_epoch = ?, once_uid = ?, once_mask = ? WHERE runtime_id = ?",
		h.last, h.onceEpoch, h.onceUID, h.onceMask, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return &notFoundError{id: id}
	}
	return nil
}

// readHead reads the chain head of the record id in tx.
func readHead(ctx context.Context, tx *sql.Tx, id string) (chainHead, error) {
	var h chainHead
	err := tx.QueryRowContext(ctx, "SELECT last_seq, once_epoch, once_uid, once_mask FROM workloads WHERE runtime_id = ?", id).
		Scan(&h.last, &h.onceEpoch, &h.onceUID, &h.onceMask)
	return h, err
}

// historyQuery reads the events of the records of a JSON array of runtime
// IDs (its one argument), following each record's chain: the chain's rows
// carry the events' columns, so each event is looked up once, by its seq.
var historyQuery = func() string {
	cols := eventColumns + ", prev"
	e := "e." + strings.ReplaceAll(cols, ", ", ", e.")
	return `WITH RECURSIVE chain(` + cols + `) AS (
	SELECT ` + e + ` FROM json_each(?) j JOIN workloads w ON w.runtime_id = j.value JOIN events e ON e.seq = w.last_seq
	UNION ALL
	SELECT ` + e + ` FROM chain c JOIN events e ON e.seq = c.prev WHERE c.prev != 0)
SELECT ` + eventColumns + ` FROM chain`
}()

// chainOf selects the seqs of the events of the records whose runtime IDs
// the statement's subquery ids (in place of %s) selects.
const chainOf = `WITH RECURSIVE chain(seq) AS (
	SELECT w.last_seq FROM workloads w WHERE w.last_seq != 0 AND w.runtime_id IN (%s)
	UNION ALL
	SELECT e.prev FROM chain c JOIN events e ON e.seq = c.seq WHERE e.prev != 0)
`

// nullInt is an exit code for the database: NULL when unknown.
func nullInt(p *int32) sql.NullInt32 {
	if p == nil {
		return sql.NullInt32{}
	}
	return sql.NullInt32{Int32: *p, Valid: true}
}

// nullTime is a time for the database: NULL when unknown.
func nullTime(p *time.Time) sql.NullInt64 {
	if p == nil || p.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: toDB(*p), Valid: true}
}

// scanResult turns the result columns read into r.
func scanResult(r *Result, reason string, code sql.NullInt32, started, finished sql.NullInt64) {
	r.Reason = reason
	if code.Valid {
		c := code.Int32
		r.ExitCode = &c
	}
	if started.Valid {
		t := fromDB(started.Int64)
		r.StartedAt = &t
	}
	if finished.Valid {
		t := fromDB(finished.Int64)
		r.FinishedAt = &t
	}
}

// Get returns the workload with the runtime ID, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, runtimeID string) (Workload, error) {
	row := s.db.QueryRowContext(ctx, "SELECT "+workloadColumns+" FROM workloads WHERE runtime_id = ?", runtimeID)
	w, err := scanWorkload(row.Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return Workload{}, &notFoundError{id: runtimeID}
	}
	if err != nil {
		return Workload{}, s.fail(fmt.Sprintf("get %q", runtimeID), err)
	}
	return w, nil
}

// List returns the workloads f selects, sorted by namespace, kind, name and
// runtime ID.
func (s *Store) List(ctx context.Context, f Filter) ([]Workload, error) {
	var where []string
	var args []any
	switch {
	case len(f.States) > 0:
		where = append(where, "state IN ("+placeholders(len(f.States))+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	case !f.All:
		where = append(where, "state NOT IN (?, ?, ?)")
		args = append(args, string(StateExited), string(StateFailed), string(StateDeleted))
	}
	for _, c := range []struct{ col, val string }{
		{"runtime", f.Runtime}, {"namespace", f.Namespace}, {"kind", f.Kind}, {"name", f.Name},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	cols := workloadColumns
	if f.NoSpec {
		cols = strings.Replace(cols, "spec,", "'' AS spec,", 1)
	}
	q := "SELECT " + cols + " FROM workloads"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY namespace, kind, name, runtime_id"

	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list workloads", err)
	}
	defer rows.Close()
	// Decoding the specs costs more than reading the rows: read all rows
	// first, then decode on every CPU.
	ws := []Workload{}
	var specs [][]byte
	rs := newRecordScanner()
	for rows.Next() {
		w, spec, err := rs.scan(rows)
		if err != nil {
			return nil, s.fail("list workloads", err)
		}
		ws = append(ws, w)
		specs = append(specs, spec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list workloads", err)
	}
	if f.NoSpec {
		return ws, nil
	}
	if err := decodeSpecs(ws, specs); err != nil {
		return nil, s.fail("list workloads", err)
	}
	return ws, nil
}

// decodeSpecs decodes specs[i] into ws[i].Spec, in parallel for many rows.
func decodeSpecs(ws []Workload, specs [][]byte) error {
	const perWorker = 1000
	workers := min(runtime.GOMAXPROCS(0), (len(ws)+perWorker-1)/perWorker)
	if workers <= 1 {
		return decodeRange(ws, specs, 0, len(ws))
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	chunk := (len(ws) + workers - 1) / workers
	for i := range workers {
		lo, hi := i*chunk, min((i+1)*chunk, len(ws))
		wg.Go(func() { errs[i] = decodeRange(ws, specs, lo, hi) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func decodeRange(ws []Workload, specs [][]byte, lo, hi int) error {
	for i := lo; i < hi; i++ {
		if err := json.Unmarshal(specs[i], &ws[i].Spec); err != nil {
			return fmt.Errorf("decode the spec of %q: %w", ws[i].RuntimeID, err)
		}
	}
	return nil
}

// FindByName returns every record named name, in any runtime, namespace,
// kind and state, in the order of List. It resolves a bare NAME argument.
func (s *Store) FindByName(ctx context.Context, name string) ([]Workload, error) {
	if name == "" {
		return nil, errors.New("find workload: empty name")
	}
	return s.List(ctx, Filter{All: true, Name: name})
}

// SetUID records the Kubernetes UID of the workload's current object.
func (s *Store) SetUID(ctx context.Context, runtimeID, uid string) error {
	now := s.now().UTC()
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE workloads SET uid = ?, updated_at = ? WHERE runtime_id = ?", uid, toDB(now), runtimeID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return &notFoundError{id: runtimeID}
		}
		return nil
	})
	if err != nil {
		return s.fail(fmt.Sprintf("set UID of %q", runtimeID), err)
	}
	return nil
}

// Events returns the history of the runtime IDs (of every workload when none
// is given), oldest first.
func (s *Store) Events(ctx context.Context, runtimeIDs ...string) ([]Event, error) {
	q := "SELECT " + eventColumns + " FROM events"
	var args []any
	if len(runtimeIDs) > 0 {
		list, err := jsonIDs(runtimeIDs)
		if err != nil {
			return nil, err
		}
		// Each record's chain (schema 9: events has no index by record).
		q = historyQuery
		args = append(args, list)
	}
	return s.queryEvents(ctx, q+" ORDER BY seq", args...)
}

// Records reads the records of ids without their specs (Spec is zero), by
// runtime ID; IDs with no record are absent. One query per 500 IDs: the
// monitor reads thousands of records at once and needs only their states
// and UIDs.
func (s *Store) Records(ctx context.Context, ids []string) (map[string]Workload, error) {
	out := make(map[string]Workload, len(ids))
	cols := strings.Replace(workloadColumns, "spec,", "'' AS spec,", 1)
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, "SELECT "+cols+" FROM workloads WHERE runtime_id IN ("+placeholders(len(chunk))+")", args...)
		if err != nil {
			return nil, s.fail("read workloads", err)
		}
		rs := newRecordScanner()
		for rows.Next() {
			w, _, err := rs.scan(rows)
			if err != nil {
				rows.Close()
				return nil, s.fail("read workloads", err)
			}
			out[w.RuntimeID] = w
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, s.fail("read workloads", err)
		}
	}
	return out, nil
}

// LastEventSeq returns the sequence number of the newest event (0 when there
// is none): where a later EventsSince poll starts.
func (s *Store) LastEventSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM events").Scan(&seq); err != nil {
		return 0, s.fail("read events", err)
	}
	return seq, nil
}

// EventsSince returns the events recorded after the one with sequence number
// afterSeq (by any process), oldest first. Poll it with the Seq of the last
// event seen; 0 returns the whole history.
func (s *Store) EventsSince(ctx context.Context, afterSeq int64) ([]Event, error) {
	return s.queryEvents(ctx, "SELECT "+eventColumns+" FROM events WHERE seq > ? ORDER BY seq", afterSeq)
}

// EventsPage is EventsSince's first limit events.
func (s *Store) EventsPage(ctx context.Context, afterSeq int64, limit int) ([]Event, error) {
	return s.queryEvents(ctx, "SELECT "+eventColumns+" FROM events WHERE seq > ? ORDER BY seq LIMIT ?", afterSeq, limit)
}

func (s *Store) queryEvents(ctx context.Context, q string, args ...any) ([]Event, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("read events", err)
	}
	defer rows.Close()
	evs := []Event{}
	for rows.Next() {
		var e Event
		var typ string
		var t int64
		var reason string
		var code sql.NullInt32
		var started, finished sql.NullInt64
		if err := rows.Scan(&e.Seq, &e.RuntimeID, &typ, &e.Message, &e.UID, &t, &reason, &code, &started, &finished); err != nil {
			return nil, s.fail("read events", err)
		}
		scanResult(&e.Result, reason, code, started, finished)
		e.Type = EventType(typ)
		e.Time = fromDB(t)
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("read events", err)
	}
	return evs, nil
}

// scanWorkload reads the workloadColumns of one row and decodes its spec.
func scanWorkload(scan func(...any) error) (Workload, error) {
	var spec []byte
	w, err := scanRow(scan, &spec)
	if err != nil {
		return Workload{}, err
	}
	if err := json.Unmarshal(spec, &w.Spec); err != nil {
		return Workload{}, fmt.Errorf("decode the spec of %q: %w", w.RuntimeID, err)
	}
	return w, nil
}

// scanRow reads the workloadColumns of one row, leaving the spec JSON in spec.
func scanRow(scan func(...any) error, spec *[]byte) (Workload, error) {
	var w Workload
	var state, request, expect string
	var created, updated int64
	var reason string
	var code sql.NullInt32
	var started, finished sql.NullInt64
	if err := scan(&w.RuntimeID, &w.Runtime, &w.Namespace, &w.Kind, &w.Name, &w.UID, spec,
		&state, &w.Message, &w.Epoch, &request, &expect, &created, &updated,
		&reason, &code, &started, &finished); err != nil {
		return Workload{}, err
	}
	scanResult(&w.Result, reason, code, started, finished)
	w.State = State(state)
	w.Request, w.Expect = EventType(request), EventType(expect)
	w.CreatedAt = fromDB(created)
	w.UpdatedAt = fromDB(updated)
	return w, nil
}

// jsonIDs is ids as one JSON array, for "IN (SELECT value FROM json_each(?))":
// one parameter whatever their number (SQLite allows 32,766).
func jsonIDs(ids []string) (string, error) {
	b, err := json.Marshal(ids)
	return string(b), err
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func (s State) known() bool {
	switch s {
	case StateCreated, StateStarting, StateRunning, StatePaused, StateStopping, StateExited, StateFailed, StateDeleted:
		return true
	}
	return false
}

func (t EventType) known() bool {
	switch t {
	case Created, StartRequested, StopRequested, PauseRequested, ResumeRequested, RestartRequested, DeleteRequested, Adopted, RequestFailed, SpecUpdated:
		return true
	}
	return t.Observed()
}
