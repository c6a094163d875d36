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
