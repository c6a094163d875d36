package store

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRowsMatchesList(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	fill(t, s, 300)
	if err := s.SetCluster(ctx, "k8s-ns-01|job|w-00001", "https://a"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Filter{{}, {All: true}, {All: true, NoSpec: true}, {States: []State{StateExited}}, {Namespace: "ns-03", Kind: "job"}} {
		want, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Select(ctx, Query{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Rows(%+v) differs from List (-want +got):\n%s", f, diff)
		}
	}
	got, err := s.Select(ctx, Query{Filter: Filter{All: true}, Cluster: "https://a"})
	if err != nil || len(got) != 1 || got[0].RuntimeID != "k8s-ns-01|job|w-00001" {
		t.Fatalf("Cluster: %v, %v", got, err)
	}
	got, err = s.Select(ctx, Query{Filter: Filter{All: true}, ExcludeStates: []State{StateRunning},
		Match: func(w Workload) bool { return w.Spec.Labels["team"] == "data" && w.Kind == "job" }})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 { // 150 jobs, a third exited
		t.Fatalf("Match + ExcludeStates: %d rows, want 50", len(got))
	}
	// Rows streams: breaking out after three rows has read three rows,
	// not the table.
	n, read := 0, 0
	for _, err := range s.Rows(ctx, Query{Filter: Filter{All: true}, Match: func(Workload) bool { read++; return true }}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	if read != 3 {
		t.Errorf("Rows read %d rows for the first 3, want 3", read)
	}
	if _, err := s.Select(ctx, Query{IDs: []string{"k8s-ns-01|job|w-00001"}, Filter: Filter{All: true}}); err != nil {
		t.Fatal(err)
	}
}

// Rows with Query.Fields reads the fields asked for, as List reads them,
// and leaves the others zero: a listing reads only the columns it prints.
func TestRowsFields(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	fill(t, s, 120)
	// Results, requests and messages on some records, so that every field
	// has something to read.
	// n numbers the records in key order (the table has no rowid since schema 7).
	if _, err := s.db.ExecContext(ctx, `UPDATE workloads SET reason = 'Error', exit_code = n % 7, started_at = 1000000000 * n,
		finished_at = 2000000000 * n, message = 'm ' || n, request = 'StopRequested', expect = 'ContainerDeleted', epoch = 2,
		updated_at = 3000000000 * n, created_at = 1000000000 * n
		FROM (SELECT runtime_id AS rid, row_number() OVER (ORDER BY runtime_id) AS n FROM workloads) AS r
		WHERE workloads.runtime_id = r.rid AND n % 3 = 1`); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx, Filter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	only := func(w Workload, f Fields) Workload {
		o := Workload{RuntimeID: w.RuntimeID}
		if f&FieldKind != 0 {
			o.Kind = w.Kind
		}
		if f&FieldState != 0 {
			o.State = w.State
		}
		if f&FieldCreated != 0 {
			o.CreatedAt = w.CreatedAt
		}
		if f&FieldPlace != 0 {
			o.Runtime, o.Namespace, o.Name = w.Runtime, w.Namespace, w.Name
		}
		if f&FieldUID != 0 {
			o.UID = w.UID
		}
		if f&FieldMessage != 0 {
			o.Message = w.Message
		}
		if f&FieldUpdated != 0 {
			o.UpdatedAt = w.UpdatedAt
		}
		if f&FieldResult != 0 {
			o.Result = w.Result
		}
		if f&FieldRequest != 0 {
			o.Epoch, o.Request, o.Expect = w.Epoch, w.Request, w.Expect
		}
		if f&FieldSpec != 0 {
			o.Spec = w.Spec
		}
		return o
	}
	for _, f := range []Fields{FieldRuntimeID, FieldKind, FieldState, FieldCreated, FieldPlace, FieldUID, FieldMessage,
		FieldUpdated, FieldResult, FieldRequest, FieldSpec, FieldKind | FieldState | FieldCreated, FieldsAll &^ FieldSpec, FieldsAll} {
		got, err := s.Select(ctx, Query{Filter: Filter{All: true}, Fields: f})
		if err != nil {
			t.Fatal(err)
		}
		want := make([]Workload, len(all))
		for i, w := range all {
			want[i] = only(w, f)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Fields %#x (-want +got):\n%s", f, diff)
		}
	}
	// Match sees what Fields reads.
	got, err := s.Select(ctx, Query{Filter: Filter{All: true}, Fields: FieldSpec | FieldKind,
		Match: func(w Workload) bool { return w.Spec.Labels["team"] == "data" && w.Kind == "job" && w.Name == "" }})
	if err != nil || len(got) != 60 {
		t.Fatalf("Match with Fields: %d rows (want 60), %v", len(got), err)
	}
}
