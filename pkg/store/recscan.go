package store

import "database/sql"

// recordScanner reads the workloadColumns of the rows of one query, one row
// after another, into scan targets allocated once per query. scanRow's
// variadic call made its 18 targets and the locals behind them escape:
// about a dozen heap allocations a row, the largest share of what
// ApplyBatch's record read allocated (memory profile of
// BenchmarkApplyBatchNoSpecs) and, through the collections they cost, of
// its CPU.
type recordScanner struct {
	w                              Workload
	spec                           []byte
	state, request, expect, reason string
	created, updated               int64
	code                           sql.NullInt32
	started, finished              sql.NullInt64
	dest                           []any
}

// newRecordScanner returns a scanner of the workloadColumns followed by the
// targets of extra (read into by each scan).
func newRecordScanner(extra ...any) *recordScanner {
	r := &recordScanner{}
	r.dest = append([]any{&r.w.RuntimeID, &r.w.Runtime, &r.w.Namespace, &r.w.Kind, &r.w.Name, &r.w.UID, &r.spec,
		&r.state, &r.w.Message, &r.w.Epoch, &r.request, &r.expect, &r.created, &r.updated,
		&r.reason, &r.code, &r.started, &r.finished}, extra...)
	return r
}

// scan reads the row rows is on, as scanRow does: the record (without its
// spec) and the spec's JSON, a slice of its own (nil when the query read
// NULL for it).
func (r *recordScanner) scan(rows *sql.Rows) (Workload, []byte, error) {
	r.spec = nil
	if err := rows.Scan(r.dest...); err != nil {
		return Workload{}, nil, err
	}
	w := r.w
	scanResult(&w.Result, r.reason, r.code, r.started, r.finished)
	w.State = State(r.state)
	w.Request, w.Expect = EventType(r.request), EventType(r.expect)
	w.CreatedAt = fromDB(r.created)
	w.UpdatedAt = fromDB(r.updated)
	return w, r.spec, nil
}
