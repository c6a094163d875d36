package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// Query selects workloads for Rows: a Filter, plus what a listing of many
// records narrows by without loading them all.
type Query struct {
	Filter
	// Cluster, when set, keeps the records whose recorded cluster identity
	// (see SetCluster) is this one; records without one are left out.
	Cluster string
	// IDs, when set, keeps only these runtime IDs.
	IDs []string
	// ExcludeStates leaves these states out (applied after States/All).
	ExcludeStates []State
	// Match, when set, is asked of every row (with its spec unless
	// NoSpec) and keeps those it returns true for: a label selector.
	Match func(Workload) bool
	// Fields, when not zero, are the fields Rows reads of each record
	// besides its runtime ID (always read); the others are left zero, the
	// spec too unless FieldSpec is among them. A listing that prints four
	// columns reads four: each column read costs SQLite a decode and the
	// driver a locked call, most of a 100,000-row ps. Zero reads every
	// field (the spec unless NoSpec). Match sees what Fields reads.
	Fields Fields
}

// Fields are groups of a record's fields, for Query.Fields.
type Fields uint16

const (
	FieldRuntimeID Fields = 1 << iota // RuntimeID (always read)
	FieldKind                         // Kind
	FieldState                        // State
	FieldCreated                      // CreatedAt
	FieldPlace                        // Runtime, Namespace and Name
	FieldUID                          // UID
	FieldMessage                      // Message
	FieldUpdated                      // UpdatedAt
	FieldResult                       // Result: Reason, ExitCode, StartedAt, FinishedAt
	FieldRequest                      // Epoch, Request and Expect
	FieldSpec                         // Spec

	// FieldsAll is every field.
	FieldsAll = FieldRuntimeID | FieldKind | FieldState | FieldCreated | FieldPlace | FieldUID | FieldMessage | FieldUpdated | FieldResult | FieldRequest | FieldSpec
)

func (q Query) sql(cols string) (string, []any) {
	var where []string
	var args []any
	switch {
	case len(q.States) > 0:
		where = append(where, "w.state IN ("+placeholders(len(q.States))+")")
		for _, st := range q.States {
			args = append(args, string(st))
		}
	case !q.All:
		where = append(where, "w.state NOT IN (?, ?, ?)")
		args = append(args, string(StateExited), string(StateFailed), string(StateDeleted))
	}
	if len(q.ExcludeStates) > 0 {
		where = append(where, "w.state NOT IN ("+placeholders(len(q.ExcludeStates))+")")
		for _, st := range q.ExcludeStates {
			args = append(args, string(st))
		}
	}
	for _, c := range []struct{ col, val string }{
		{"w.runtime", q.Runtime}, {"w.namespace", q.Namespace}, {"w.kind", q.Kind}, {"w.name", q.Name},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	if len(q.IDs) > 0 {
		where = append(where, "w.runtime_id IN ("+placeholders(len(q.IDs))+")")
		for _, id := range q.IDs {
			args = append(args, id)
		}
	}
	from := " FROM workloads w"
	if q.Cluster != "" {
		from += " JOIN clusters c ON c.runtime_id = w.runtime_id AND c.cluster = ?"
		args = append([]any{q.Cluster}, args...)
	}
	s := "SELECT " + cols + from
	if len(where) > 0 {
		s += " WHERE " + strings.Join(where, " AND ")
	}
	// The order of List, served by the workloads_namespace index: the
	// first row comes without sorting the table.
	return s + " ORDER BY w.namespace, w.kind, w.name, w.runtime_id", args
}

// mmapSize is how much of the database file a scan of Rows maps: 1 GiB,
// SQLite's limit on Linux is 2 GiB.
const mmapSize = "1073741824"

// Rows streams the workloads q selects in the order of List (namespace,
// kind, name, runtime ID), one at a time: a listing of 100,000 records
// prints its first row before the last is read, and holds one row in memory.
// The iteration holds a read transaction (which never blocks writers: the
// journal is WAL) until it ends; stop it early by breaking out of the loop.
// An error ends the iteration, yielded with a zero Workload.
func (s *Store) Rows(ctx context.Context, q Query) iter.Seq2[Workload, error] {
	return func(yield func(Workload, error) bool) {
		sc := newRowScanner(q.fields())
		query, args := q.sql(sc.cols)
		conn, err := s.db.Conn(ctx)
		if err != nil {
			yield(Workload{}, s.fail("list workloads", err))
			return
		}
		defer conn.Close()
		// The order of the index reads the table's pages out of order, each
		// many times: through SQLite's 2 MB page cache every read is a
		// pread. Mapping the file for this scan takes a 100,000-record
		// listing from 1.2 s to 0.5 s without growing the heap; the
		// mapping ends with the scan. The file never shrinks
		// under it: gobrave runs no VACUUM and no auto_vacuum.
		if _, err := conn.ExecContext(ctx, "PRAGMA mmap_size = "+mmapSize); err == nil {
			defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA mmap_size = 0")
		}
		rows, err := conn.QueryContext(ctx, query, args...)
		if err != nil {
			yield(Workload{}, s.fail("list workloads", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			w, err := sc.scan(rows)
			if err != nil {
				yield(Workload{}, s.fail("list workloads", err))
				return
			}
			if q.Match != nil && !q.Match(w) {
				continue
			}
			if !yield(w, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(Workload{}, s.fail("list workloads", err))
		}
	}
}

// fields are the fields q reads.
func (q Query) fields() Fields {
	f := q.Fields
	if f == 0 {
		f = FieldsAll
		if q.NoSpec {
			f &^= FieldSpec
		}
	}
	return f
}

// rowScanner reads the columns of the fields it was made for into the same
// variables row after row: a row costs the strings it holds, not a heap
// object per column as scanRow's variables do.
type rowScanner struct {
	fields Fields
	cols   string // the columns of the fields, for SELECT
	dest   []any
	w      Workload // the string fields are scanned in place

	spec                   []byte
	state, request, expect string
	created, updated       int64
	code                   sql.NullInt32
	started, finished      sql.NullInt64
}

func newRowScanner(f Fields) *rowScanner {
	sc := &rowScanner{fields: f}
	cols := []string{"w.runtime_id"}
	sc.dest = []any{&sc.w.RuntimeID}
	add := func(g Fields, col string, dest any) {
		if f&g != 0 {
			cols = append(cols, col)
			sc.dest = append(sc.dest, dest)
		}
	}
	add(FieldKind, "w.kind", &sc.w.Kind)
	add(FieldState, "w.state", &sc.state)
	add(FieldCreated, "w.created_at", &sc.created)
	add(FieldPlace, "w.runtime", &sc.w.Runtime)
	add(FieldPlace, "w.namespace", &sc.w.Namespace)
	add(FieldPlace, "w.name", &sc.w.Name)
	add(FieldUID, "w.uid", &sc.w.UID)
	add(FieldMessage, "w.message", &sc.w.Message)
	add(FieldUpdated, "w.updated_at", &sc.updated)
	add(FieldResult, "w.reason", &sc.w.Reason)
	add(FieldResult, "w.exit_code", &sc.code)
	add(FieldResult, "w.started_at", &sc.started)
	add(FieldResult, "w.finished_at", &sc.finished)
	add(FieldRequest, "w.epoch", &sc.w.Epoch)
	add(FieldRequest, "w.request", &sc.request)
	add(FieldRequest, "w.expect", &sc.expect)
	add(FieldSpec, "w.spec", &sc.spec)
	sc.cols = strings.Join(cols, ", ")
	return sc
}

// scan reads the current row of rows.
func (sc *rowScanner) scan(rows *sql.Rows) (Workload, error) {
	if err := rows.Scan(sc.dest...); err != nil {
		return Workload{}, err
	}
	w := sc.w
	f := sc.fields
	if f&FieldState != 0 {
		w.State = State(sc.state)
	}
	if f&FieldCreated != 0 {
		w.CreatedAt = fromDB(sc.created)
	}
	if f&FieldUpdated != 0 {
		w.UpdatedAt = fromDB(sc.updated)
	}
	if f&FieldResult != 0 {
		scanResult(&w.Result, w.Reason, sc.code, sc.started, sc.finished)
	}
	if f&FieldRequest != 0 {
		w.Request, w.Expect = EventType(sc.request), EventType(sc.expect)
	}
	if f&FieldSpec != 0 {
		sp := new(spec.ContainerSpec)
		if err := json.Unmarshal(sc.spec, sp); err != nil {
			return Workload{}, fmt.Errorf("decode the spec of %q: %w", w.RuntimeID, err)
		}
		w.Spec = *sp
	}
	return w, nil
}

// Select collects what Rows streams: for the verbs that act on a selection
// (a few IDs, never a whole listing to print).
func (s *Store) Select(ctx context.Context, q Query) ([]Workload, error) {
	var out []Workload
	for w, err := range s.Rows(ctx, q) {
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}
