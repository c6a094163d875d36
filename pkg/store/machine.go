package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// Next is the state machine: the state a workload in state cur moves to on
// an event of type t, and whether the event is recorded at all. It knows no
// kind: expect, recorded with the last request, is the observed event that
// completes it when the kind says so (a job's stop ends with its deletion,
// a job's pause with its suspension).
//
// Requested events are always recorded. Observed events are not recorded
// when they say nothing new: a start when the workload is not created,
// starting or paused (an unsuspended job runs again); a suspension
// (ContainerPaused) when it is not created, starting or running, or
// stopping for a pause (a suspension seen while a stop deletes the job
// does not undo the stop); an exit or failure after a terminal state. A
// deletion that completes a stop (expect is ContainerDeleted) has exited,
// or keeps the exit or failure recorded while it was stopping; any other
// deletion, a paused workload's too, ends in deleted, and a deletion
// confirmed after that is recorded but changes nothing. Adopted and
// RequestFailed keep the state (the caller sets it). Unknown types are not
// recorded. docs/architecture.md has the whole table.
func Next(cur State, t, expect EventType) (next State, record bool) {
	switch t {
	case Created:
		return StateCreated, true
	case StartRequested, ResumeRequested, RestartRequested:
		return StateStarting, true
	case StopRequested, PauseRequested:
		return StateStopping, true
	case DeleteRequested:
		return StateDeleted, true
	case Adopted, RequestFailed:
		return cur, true
	case SpecUpdated:
		// expect is the update's own: ContainerStarted when the new spec
		// rolls out now (a running service's new pods).
		if expect == ContainerStarted {
			return StateStarting, true
		}
		return cur, true
	case ContainerStarted:
		if cur == StateCreated || cur == StateStarting || cur == StatePaused {
			return StateRunning, true
		}
		return cur, false
	case ContainerPaused:
		switch {
		case cur == StateCreated || cur == StateStarting || cur == StateRunning:
			return StatePaused, true
		case cur == StateStopping && expect == ContainerPaused:
			return StatePaused, true
		}
		return cur, false
	case ContainerExited:
		if cur.Terminal() {
			return cur, false
		}
		return StateExited, true
	case ContainerFailed:
		if cur.Terminal() {
			return cur, false
		}
		return StateFailed, true
	case ContainerWaiting:
		// A reason for a workload still starting or running; the record
		// keeps its state.
		if cur == StateCreated || cur == StateStarting || cur == StateRunning {
			return cur, true
		}
		return cur, false
	case ContainerDeleted:
		switch {
		case cur == StateDeleted:
			return cur, true
		case cur == StateStopping && expect == ContainerDeleted:
			return StateExited, true
		case cur.Terminal() && expect == ContainerDeleted:
			// The stop's deletion of a workload that had ended meanwhile.
			return cur, true
		default:
			return StateDeleted, true
		}
	}
	return cur, false
}

// stoppedMessage is the message of a job whose deletion completed a stop.
const stoppedMessage = "stopped"

// Applied is the outcome of one transition of ApplyBatch.
type Applied struct {
	// Event is the recorded event; when Applied is false it is the event
	// that was not recorded, with Seq 0.
	Event Event
	// Applied reports whether the event was recorded (and the state moved).
	Applied bool
	// Workload is the record after the transition.
	Workload Workload
}

// Apply records t and moves the workload's state (see Next). It returns the
// recorded event and true, or the unrecorded event and false when t is
// ignored: an observed event already recorded for this object and epoch (by
// any process), one that says nothing new in the current state, one made for
// an older request (t.Epoch below the record's), or one about an older object
// (its UID differs from the workload's, or, while a retired object is being
// replaced, it was seen in an earlier epoch). Every requested event but
// RequestFailed raises the epoch. An unknown runtime ID is an error wrapping
// ErrNotFound. It returns no record, so it never reads the spec
// (ApplyBatchNoSpecs).
func (s *Store) Apply(ctx context.Context, t Transition) (Event, bool, error) {
	as, err := s.ApplyBatchNoSpecs(ctx, []Transition{t})
	if err != nil {
		return Event{}, false, err
	}
	return as[0].Event, as[0].Applied, nil
}

// ApplyBatch applies the transitions in order in one transaction: all of
// them or, on an error (such as an unknown runtime ID, wrapping ErrNotFound),
// none. The result has one Applied per transition.
//
// The transaction reads the records of the batch in one query (its IDs as
// one JSON array), moves them
// in memory, inserts one events row per recorded transition and writes the
// records that changed in one statement at the end: three statements and a
// round trip per event, where a transition used to cost a read, an insert
// and an update (docs/performance.md, "Store"). The write lock held from
// BEGIN IMMEDIATE keeps other processes out between the read and the write.
func (s *Store) ApplyBatch(ctx context.Context, ts []Transition) ([]Applied, error) {
	return s.applyBatch(ctx, ts, true)
}

// ApplyBatchNoSpecs is ApplyBatch for a caller that reads only the states
// and events of the result (the monitors, recover): every Applied's
// Workload has a nil Spec, and the specs of the batch's records are never
// decoded, which was about a tenth of ApplyBatch's CPU.
func (s *Store) ApplyBatchNoSpecs(ctx context.Context, ts []Transition) ([]Applied, error) {
	return s.applyBatch(ctx, ts, false)
}

func (s *Store) applyBatch(ctx context.Context, ts []Transition, specs bool) ([]Applied, error) {
	for _, t := range ts {
		if t.RuntimeID == "" {
			return nil, errors.New("apply: empty runtime ID")
		}
		if !t.Type.known() {
			return nil, fmt.Errorf("apply %s to %q: unknown event type", t.Type, t.RuntimeID)
		}
	}
	if len(ts) == 0 {
		return []Applied{}, nil
	}
	var out []Applied
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.applyTx(ctx, tx, ts, s.now().UTC(), specs)
		out = res
		return err
	})
	if err != nil {
		return nil, s.fail("apply events", err)
	}
	return out, nil
}

// applyTx applies ts in tx at now (see ApplyBatch) and writes the records
// that moved. With specs, every Applied's Workload carries its spec; without, the
// specs are neither decoded nor returned (a caller that only reads the state).
func (s *Store) applyTx(ctx context.Context, tx *sql.Tx, ts []Transition, now time.Time, specs bool) ([]Applied, error) {
	a, err := newApplier(ctx, s, tx, ts, specs)
	if err != nil {
		return nil, err
	}
	defer a.close()
	res, err := a.run(ctx, ts, now)
	if err != nil {
		return nil, err
	}
	if !specs {
		return res, nil
	}
	// The specs, decoded meanwhile on another goroutine.
	decoded, err := a.specs()
	if err != nil {
		return nil, err
	}
	for i := range res {
		res[i].Workload.Spec = decoded[res[i].Workload.RuntimeID]
	}
	return res, nil
}

// run applies ts in order and writes the records that moved.
//
// Its statements run under a context that is never done: for a
// statement whose context can end, modernc.org/sqlite starts a goroutine
// that waits for the end to interrupt it, and installs a progress handler,
// which cost more than inserting an event (pprof of recover --once: ~4 %
// of its CPU, with the scheduling; one INSERT per transition). ctx is
// checked before each transition instead: a cancelled pass stops within one
// statement (microseconds) and its transaction is rolled back as before.
func (a *applier) run(ctx context.Context, ts []Transition, now time.Time) ([]Applied, error) {
	sctx := context.WithoutCancel(ctx)
	res := make([]Applied, 0, len(ts))
	for _, t := range ts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := a.apply(sctx, t, now)
		if err != nil {
			return nil, err
		}
		res = append(res, r)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := a.flush(sctx, now); err != nil {
		return nil, err
	}
	return res, nil
}

// applier is one ApplyBatch transaction: the records of its runtime IDs,
// moved in memory, and the statements it reuses.
type applier struct {
	s       *Store
	tx      *sql.Tx
	insert  *sql.Stmt // of tx
	recs    map[string]*Workload
	chains  map[string]*chainHead
	dirty   []string // runtime IDs whose record moved, in first-move order
	isDirty map[string]bool
	decoded chan decodedSpecs
}

type decodedSpecs struct {
	specs map[string]spec.ContainerSpec
	err   error
}

func newApplier(ctx context.Context, s *Store, tx *sql.Tx, ts []Transition, specs bool) (*applier, error) {
	// Every record of the batch, in one query; the specs (JSON) are
	// decoded on another goroutine while the events are written.
	var ids []string
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if !seen[t.RuntimeID] {
			seen[t.RuntimeID] = true
			ids = append(ids, t.RuntimeID)
		}
	}
	rb, err := s.readBatch(ctx, tx, ids, specs, false)
	if err != nil {
		return nil, err
	}
	return rb.applier(ctx, s, tx, ts)
}

// readBatch is the records of a batch as one query read them, with their
// specs (undecoded; with specs only) and their clusters
// (with clusters only).
type readBatch struct {
	recs     map[string]*Workload
	chains   map[string]*chainHead
	raw      map[string][]byte
	clusters map[string]string
}

// readBatch reads the records of ids (no duplicates) in tx, in one query.
// IDs without a record are absent from the result.
func (s *Store) readBatch(ctx context.Context, tx *sql.Tx, ids []string, specs, clusters bool) (*readBatch, error) {
	rb := &readBatch{recs: make(map[string]*Workload, len(ids)), chains: make(map[string]*chainHead, len(ids))}
	if specs {
		rb.raw = make(map[string][]byte, len(ids))
	}
	if clusters {
		rb.clusters = make(map[string]string, len(ids))
	}
	if len(ids) == 0 {
		return rb, nil
	}
	q, err := s.readRecords(ctx, specs, clusters)
	if err != nil {
		return nil, err
	}
	list, err := jsonIDs(ids)
	if err != nil {
		return nil, err
	}
	txq := tx.StmtContext(ctx, q)
	defer txq.Close()
	rows, err := txq.QueryContext(ctx, list)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cluster string
	var ch chainHead
	rs := newRecordScanner(&ch.last, &ch.onceEpoch, &ch.onceUID, &ch.onceMask)
	if clusters {
		rs = newRecordScanner(&ch.last, &ch.onceEpoch, &ch.onceUID, &ch.onceMask, &cluster)
	}
	heads := make([]chainHead, 0, len(ids))
	// The records in one allocation: ids has no duplicates, so the query
	// returns at most len(ids) rows and all never grows.
	all := make([]Workload, 0, len(ids))
	for rows.Next() {
		w, sp, err := rs.scan(rows)
		if err != nil {
			return nil, err
		}
		if len(all) == cap(all) {
			all = make([]Workload, 0, len(ids)) // not reached: the rows are at most the IDs
		}
		all = append(all, w)
		rb.recs[w.RuntimeID] = &all[len(all)-1]
		heads = append(heads, ch)
		rb.chains[w.RuntimeID] = &heads[len(heads)-1]
		if specs {
			rb.raw[w.RuntimeID] = sp
		}
		if clusters {
			rb.clusters[w.RuntimeID] = cluster
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return rb, nil
}

// applier makes the applier of ts (all of whose records must have been
// read) over the records read; it owns them from then on.
func (rb *readBatch) applier(ctx context.Context, s *Store, tx *sql.Tx, ts []Transition) (*applier, error) {
	for _, t := range ts { // the first unknown ID in the order of the batch
		if rb.recs[t.RuntimeID] == nil {
			return nil, &notFoundError{id: t.RuntimeID}
		}
	}
	a := &applier{s: s, tx: tx, recs: rb.recs, chains: rb.chains, isDirty: map[string]bool{}}
	// The inserts are prepared once per store (Store.stmt), not per
	// transaction: a monitor records a few events a batch, and parsing the
	// statements cost more than running them.
	st, err := s.stmt(ctx, insertEventQuery)
	if err != nil {
		return nil, err
	}
	a.insert = tx.StmtContext(ctx, st)
	if rb.raw == nil {
		return a, nil
	}
	raw := rb.raw
	a.decoded = make(chan decodedSpecs, 1)
	go func() {
		d := decodedSpecs{specs: make(map[string]spec.ContainerSpec, len(raw))}
		for id, b := range raw {
			var sp spec.ContainerSpec
			if err := json.Unmarshal(b, &sp); err != nil {
				d.err = fmt.Errorf("decode the spec of %q: %w", id, err)
				break
			}
			d.specs[id] = sp
		}
		a.decoded <- d
	}()
	return a, nil
}

// setUID sets the UID of the record id, as SetUID does, when it was read;
// flush writes it.
func (a *applier) setUID(id, uid string, now time.Time) {
	w := a.recs[id]
	if w == nil {
		return // gone: skipped
	}
	w.UID, w.UpdatedAt = uid, now
	a.markDirty(id)
}

func (a *applier) markDirty(id string) {
	if !a.isDirty[id] {
		a.isDirty[id] = true
		a.dirty = append(a.dirty, id)
	}
}

// specs waits for the decoded specs.
func (a *applier) specs() (map[string]spec.ContainerSpec, error) {
	d := <-a.decoded
	a.decoded = nil
	return d.specs, d.err
}

func (a *applier) close() {
	if a.decoded != nil {
		<-a.decoded // the decoding goroutine ends before the transaction does
		a.decoded = nil
	}
	if a.insert != nil {
		a.insert.Close()
	}
}

// flush writes every record that moved: an UPDATE of many rows, each found
// by its runtime ID, the table's key since schema 7 (it was found by its
// rowid before, read with the record). It used to be an upsert on the
// runtime ID: that built an insert of all 17 columns and searched the
// primary key's text index before turning into the update: a third of its
// work in SQLite (docs/performance.md). Each statement must find all its
// rows; one that finds fewer is an error, never a lost write.
// The statements for 64, 8 and 1 rows are prepared once per connection
// (Store.stmt) and reused by every batch: parsing a statement of hundreds
// of values cost as much as running it.
func (a *applier) flush(ctx context.Context, now time.Time) error {
	ids := a.dirty
	// One argument list for every statement (the largest's), refilled.
	args := make([]any, 0, updateCols*min(len(ids), updateSizes[0]))
	var at any = toDB(now) // boxed once
	for _, size := range updateSizes {
		st, err := a.s.stmt(ctx, updateQueries[size])
		if err != nil {
			return err
		}
		txst := a.tx.StmtContext(ctx, st)
		for len(ids) >= size {
			args = args[:0]
			for _, id := range ids[:size] {
				w, ch := a.recs[id], a.chains[id]
				args = append(args, id, string(w.State), w.Message, w.UID, w.Epoch,
					string(w.Request), string(w.Expect), at,
					w.Result.Reason, dbInt(w.Result.ExitCode), dbTime(w.Result.StartedAt), dbTime(w.Result.FinishedAt),
					ch.last, ch.onceEpoch, ch.onceUID, ch.onceMask)
			}
			res, err := txst.ExecContext(ctx, args...)
			if err == nil {
				var n int64
				if n, err = res.RowsAffected(); err == nil && n != int64(size) {
					err = fmt.Errorf("write %d records: %d found", size, n)
				}
			}
			if err != nil {
				txst.Close()
				return err
			}
			ids = ids[size:]
		}
		txst.Close()
	}
	return nil
}

// updateSizes are the row counts of the prepared updates of flush, largest first.
var updateSizes = []int{64, 8, 1}

const updateCols = 16

// readRecords returns the statement that reads the records of a JSON array
// of runtime IDs (one parameter, whatever the batch's size), prepared once:
// the columns of scanRow and, with clusters, the record's
// cluster (” when none). Without specs it reads NULL for the spec: SQLite
// then never reads the column, most of a record's bytes and often on
// overflow pages of its own.
func (s *Store) readRecords(ctx context.Context, specs, clusters bool) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	cols := "w." + strings.ReplaceAll(workloadColumns, ", ", ", w.")
	i := 0
	if specs {
		i = 1
	} else {
		cols = strings.Replace(cols, " w.spec,", " NULL,", 1)
	}
	cols += ", w.last_seq, w.once_epoch, w.once_uid, w.once_mask"
	from := " FROM workloads w"
	if clusters {
		i += 2
		cols += ", COALESCE(c.cluster, '')"
		from += " LEFT JOIN clusters c ON c.runtime_id = w.runtime_id"
	}
	if s.readRecs[i] != nil {
		return s.readRecs[i], nil
	}
	// The IDs are joined, not an IN list: IN (SELECT ...) first built a
	// temporary index of the array (BenchmarkReadBatch: ~10 % of the read).
	// ids has no duplicates, so the join gives each record once.
	from = " FROM json_each(?) j JOIN workloads w ON w.runtime_id = j.value" + strings.TrimPrefix(from, " FROM workloads w")
	st, err := s.db.PrepareContext(ctx, "SELECT "+cols+from)
	if err != nil {
		return nil, err
	}
	s.readRecs[i] = st
	return st, nil
}

// updateQuery is the statement that writes size records (one of
// updateSizes), built once.
func updateQuery(size int) string {
	row := "(" + placeholders(updateCols) + ")"
	return `UPDATE OR FAIL workloads SET state = v.column2, message = v.column3, uid = v.column4, epoch = v.column5,
	request = v.column6, expect = v.column7, updated_at = v.column8, reason = v.column9, exit_code = v.column10,
	started_at = v.column11, finished_at = v.column12, last_seq = v.column13, once_epoch = v.column14, once_uid = v.column15,
	once_mask = v.column16
FROM (VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", size), ", ") + `) AS v
WHERE workloads.runtime_id = v.column1`
}

// updateQueries are the texts of updateQuery, by size.
var updateQueries = func() map[int]string {
	m := make(map[int]string, len(updateSizes))
	for _, size := range updateSizes {
		m[size] = updateQuery(size)
	}
	return m
}()

func (a *applier) apply(ctx context.Context, t Transition, now time.Time) (Applied, error) {
	w := *a.recs[t.RuntimeID] // the record as the transitions before this one left it
	observed := t.Type.Observed()
	ev := Event{RuntimeID: t.RuntimeID, Type: t.Type, Message: t.Message, UID: t.UID, Time: t.Time.UTC(), Result: t.Result}
	if t.Time.IsZero() {
		ev.Time = now
	}
	if ev.UID == "" && !t.Retire {
		ev.UID = w.UID // the event is about the current object
	}
	skip := Applied{Event: ev, Workload: w}
	if observed {
		if t.Epoch != 0 && t.Epoch != w.Epoch {
			return skip, nil // made for another request
		}
		if t.UID != "" && w.UID != "" && t.UID != w.UID {
			return skip, nil // about an older object of the same name
		}
		if t.UID != "" && w.UID == "" {
			// The record's object is being replaced: an object seen in an
			// earlier epoch is the old one.
			var old bool
			if err := a.tx.QueryRowContext(ctx, seenBeforeQuery, a.chains[w.RuntimeID].last, t.UID, w.Epoch).Scan(&old); err != nil {
				return Applied{}, err
			}
			if old {
				return skip, nil
			}
		}
	}
	exp := w.Expect
	if t.Type == SpecUpdated {
		exp = t.Expect // whether the update rolls out (see Next)
	}
	next, record := Next(w.State, t.Type, exp)
	if !record || t.Type == ContainerWaiting && t.Reason == w.Reason {
		return skip, nil // a waiting reason is recorded when it changes
	}

	epoch, request, expect := w.Epoch, w.Request, w.Expect
	msg := t.Message
	uid := w.UID
	switch {
	case observed:
		if uid == "" {
			uid = t.UID
		}
	case t.Type == RequestFailed:
		current := t.Epoch == 0 || t.Epoch == w.Epoch
		if current && t.Restore.known() {
			next = t.Restore // no later request: back to where it was
			if t.RestoreRequest != "" {
				request, expect = t.RestoreRequest, t.RestoreExpect
			}
			if t.UID != "" {
				uid = t.UID
			}
		}
		if !current {
			msg = w.Message // a later request owns the record now, and its object
		}
	default:
		epoch++
		if t.Type != SpecUpdated || t.Expect != "" {
			// An update that does not roll out leaves the request that
			// stands (a job's stop still ends when the job is gone).
			request, expect = t.Type, t.Expect
		}
		if t.UID != "" {
			uid = t.UID
		}
		if t.Retire {
			uid = ""
		}
	}
	if t.Type == ContainerDeleted && next == StateExited && w.State == StateStopping {
		msg = stoppedMessage
		if ev.Message == "" {
			ev.Message = stoppedMessage
		}
		ev.Reason = ReasonStopped
	}
	if ev.Reason == "" && (t.Type == ContainerDeleted || t.Type == DeleteRequested) && next == StateDeleted {
		ev.Reason = ReasonDeleted
	}
	result := nextResult(w, ev, next)

	// A job may be suspended and unsuspended any number of times within one
	// request (Kueue preempts and admits it again), so a suspension and a
	// start out of paused are not made idempotent by the
	// once-per-object-and-epoch rule, which allows one per (object, type,
	// epoch): they are recorded with observed = 0, once per change of state,
	// and the write transaction, which reads the state it changes, keeps two
	// processes from recording the same change twice.
	toggle := t.Type == ContainerPaused || (t.Type == ContainerStarted && w.State == StatePaused)
	dedupe := observed && !toggle && onceBit(t.Type) != 0
	ch := a.chains[w.RuntimeID]
	if dedupe {
		// Recorded already in this epoch, maybe by another process? The
		// record's once columns say so for their UID (the write lock keeps
		// every other writer out since they were read); an event about
		// another UID follows the chain.
		dup, err := a.recorded(ctx, ch, epoch, t.Type, ev.UID)
		if err != nil {
			return Applied{}, err
		}
		if dup {
			return skip, nil
		}
	}
	res, err := a.insert.ExecContext(ctx, ev.RuntimeID, string(ev.Type), ev.Message, ev.UID, epoch, dedupe, toDB(ev.Time),
		ev.Reason, dbInt(ev.ExitCode), dbTime(ev.StartedAt), dbTime(ev.FinishedAt), ch.last)
	if err != nil {
		return Applied{}, err
	}
	if ev.Seq, err = res.LastInsertId(); err != nil {
		return Applied{}, err
	}
	ch.recorded(ev.Seq, epoch, ev.Type, ev.UID, dedupe)
	w.State, w.Message, w.UID, w.Epoch, w.Request, w.Expect, w.UpdatedAt = next, msg, uid, epoch, request, expect, now
	w.Result = result
	*a.recs[w.RuntimeID] = w
	a.markDirty(w.RuntimeID)
	return Applied{Event: ev, Applied: true, Workload: w}, nil
}

// dbInt is an exit code as a statement's argument: nil (NULL) when unknown.
// Unlike nullInt's sql.NullInt32, nothing to box when unknown and no
// driver.Valuer for database/sql to call.
func dbInt(p *int32) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

// dbTime is a time as a statement's argument: nil (NULL) when unknown, as
// nullTime.
func dbTime(p *time.Time) any {
	if p == nil || p.IsZero() {
		return nil
	}
	return toDB(*p)
}

// seenBeforeQuery tells whether the events of the chain that ends at seq
// name the object uid in an epoch before the one given (rare: a record whose
// object is replaced).
const seenBeforeQuery = chainFrom + "SELECT EXISTS (SELECT 1 FROM chain c JOIN events e ON e.seq = c.seq WHERE e.uid = ?2 AND e.epoch < ?3)"

// chainHead is what a record keeps of its history (schema 9): the seq of
// its last event, and the types of the events recorded once per object and
// epoch (observed = 1) in epoch onceEpoch about the object onceUID, as bits
// of onceBit.
type chainHead struct {
	last      int64
	onceEpoch int
	onceUID   string
	onceMask  int64
}

// onceBit is the bit of once_mask of an observed event type recorded at
// most once per object and epoch, 0 for the others (ContainerWaiting, which
// is recorded each time its reason changes, and the requested events). The
// migration to schema 9 uses the same bits.
func onceBit(t EventType) int64 {
	switch t {
	case ContainerStarted:
		return 1
	case ContainerExited:
		return 2
	case ContainerFailed:
		return 4
	case ContainerDeleted:
		return 8
	case ContainerPaused:
		return 16
	}
	return 0
}

// recorded moves the head to the event seq just recorded in epoch; once
// tells whether it is recorded once per object and epoch. The once columns
// keep the first UID of an epoch: an event about another UID is found by
// following the chain.
func (h *chainHead) recorded(seq int64, epoch int, t EventType, uid string, once bool) {
	h.last = seq
	if h.onceEpoch != epoch {
		h.onceEpoch, h.onceUID, h.onceMask = epoch, uid, 0
	}
	if once && uid == h.onceUID {
		h.onceMask |= onceBit(t)
	}
}

// recorded tells whether an event of type t (recorded once per object and
// epoch) about uid is recorded in epoch in the chain of h.
func (a *applier) recorded(ctx context.Context, h *chainHead, epoch int, t EventType, uid string) (bool, error) {
	return h.has(ctx, a.tx, epoch, t, uid)
}

// has tells whether an event of type t (recorded once per object and epoch)
// about uid is recorded in epoch in the chain of h, read in tx.
func (h *chainHead) has(ctx context.Context, tx *sql.Tx, epoch int, t EventType, uid string) (bool, error) {
	if h.onceEpoch != epoch {
		return false, nil // none recorded in this epoch: every writer sets once_epoch
	}
	if uid == h.onceUID {
		return h.onceMask&onceBit(t) != 0, nil
	}
	var dup bool
	err := tx.QueryRowContext(ctx, onceQuery, h.last, epoch, string(t), uid).Scan(&dup)
	return dup, err
}

// chainFrom starts a statement with the chain of events (their seqs) that
// ends at the seq of its first argument (none when 0), newest first.
const chainFrom = `WITH RECURSIVE chain(seq) AS (
	SELECT ?1 WHERE ?1 != 0
	UNION ALL
	SELECT e.prev FROM chain c JOIN events e ON e.seq = c.seq WHERE e.prev != 0)
`

// onceQuery tells whether the chain that ends at seq holds an event of
// epoch (it stops at the first of an older one) of a type about a UID
// recorded once per object and epoch.
const onceQuery = `WITH RECURSIVE chain(seq) AS (
	SELECT ?1 WHERE ?1 != 0
	UNION ALL
	SELECT e.prev FROM chain c JOIN events e ON e.seq = c.seq WHERE e.prev != 0 AND e.epoch >= ?2)
SELECT EXISTS (SELECT 1 FROM chain c JOIN events e ON e.seq = c.seq
	WHERE e.epoch = ?2 AND e.type = ?3 AND e.uid = ?4 AND e.observed = 1)`

// nextResult is the record's result after ev moved it from w to next:
//   - a new run (Created, StartRequested, ResumeRequested) forgets the last one;
//   - ContainerStarted clears the reason (a waiting reason is over) and sets
//     startedAt (the event's, else its time);
//   - ContainerWaiting sets the reason and the exit code of the last
//     termination (a crash loop's), and keeps the state;
//   - ContainerExited and ContainerFailed set the reason, the exit code and
//     the times (finishedAt: the event's, else its time);
//   - the end of a stop (Stopped) or of the object (Deleted) sets the reason
//     and finishedAt when the run had not finished.
//
// Any other event keeps the result.
func nextResult(w Workload, ev Event, next State) Result {
	r := w.Result
	at := ev.Time
	switch ev.Type {
	case Created, StartRequested, ResumeRequested, RestartRequested:
		return Result{}
	case SpecUpdated:
		if next == StateStarting {
			return Result{} // a rollout is a new run
		}
	case ContainerStarted:
		if next != StateRunning {
			return r
		}
		r.Reason, r.ExitCode, r.FinishedAt = "", nil, nil
		r.StartedAt = ev.StartedAt
		if r.StartedAt == nil {
			r.StartedAt = &at
		}
	case ContainerWaiting:
		r.Reason, r.ExitCode = ev.Reason, ev.ExitCode
	case ContainerPaused:
		if next == StatePaused {
			r.Reason = ev.Reason // Suspended; cleared when it runs again
		}
	case ContainerExited, ContainerFailed:
		r.Reason, r.ExitCode = ev.Reason, ev.ExitCode
		if ev.StartedAt != nil {
			r.StartedAt = ev.StartedAt
		}
		r.FinishedAt = ev.FinishedAt
		if r.FinishedAt == nil {
			r.FinishedAt = &at
		}
	case ContainerDeleted, DeleteRequested:
		if next == w.State && w.State.Terminal() {
			return r // ended before: its result stands
		}
		r.Reason = ev.Reason
		if r.FinishedAt == nil {
			r.FinishedAt = &at
		}
	}
	return r
}
