package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScanLive: the non-terminal records of the runtimes and kind asked
// for, page by page in runtime ID order, with their cluster; a record fn
// makes terminal is not read again, and none is read twice.
func TestScanLive(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for i := range 7 {
		mustPut(t, s, workload("ns", "job", fmt.Sprintf("j%d", i)))
	}
	mustPut(t, s, workload("ns", "deployment", "web"))
	other := workload("ns", "job", "other")
	other.RuntimeID, other.Runtime = "k3s-ns|job|other", "k3s"
	mustPut(t, s, other)
	if err := s.SetCluster(ctx, "k8s-ns|job|j1", "https://a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: "k8s-ns|job|j6", Type: ContainerDeleted}); err != nil {
		t.Fatal(err)
	}

	var got []string
	var pages []int
	err := s.ScanLive(ctx, ScanFilter{Runtimes: []string{"k8s"}, Kind: "job"}, 2, func(page []LiveRecord) error {
		pages = append(pages, len(page))
		for _, w := range page {
			got = append(got, w.RuntimeID+" "+w.Cluster)
			if w.Name == "j2" {
				// Made terminal while its page is not read yet: j4 is skipped.
				if _, _, err := s.Apply(ctx, Transition{RuntimeID: "k8s-ns|job|j4", Type: ContainerDeleted}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k8s-ns|job|j0 ", "k8s-ns|job|j1 https://a", "k8s-ns|job|j2 ", "k8s-ns|job|j3 ", "k8s-ns|job|j5 "}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{2, 2, 1}, pages); d != "" {
		t.Errorf("page sizes (-want +got):\n%s", d)
	}

	scopes, err := s.LiveScopes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantScopes := []Scope{
		{Runtime: "k3s", Namespace: "ns", Kind: "job", Count: 1},
		{Runtime: "k8s", Namespace: "ns", Kind: "deployment", Count: 1},
		{Runtime: "k8s", Namespace: "ns", Kind: "job", Count: 4},
		{Runtime: "k8s", Namespace: "ns", Kind: "job", Cluster: "https://a", Count: 1},
	}
	if d := cmp.Diff(wantScopes, scopes); d != "" {
		t.Errorf("scopes (-want +got):\n%s", d)
	}
}

// TestScanLiveStates: States and NoUID select in SQL the records of those
// states and, with NoUID, only those with no object UID recorded.
func TestScanLiveStates(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mk := func(name string, st State, uid string) {
		w := workload("ns", "job", name)
		w.State, w.UID = st, uid
		mustPut(t, s, w)
	}
	mk("created-nouid", StateCreated, "")
	mk("created-uid", StateCreated, "u1")
	mk("starting-nouid", StateStarting, "")
	mk("running-nouid", StateRunning, "")
	mk("stopping-uid", StateStopping, "u2")
	scan := func(f ScanFilter) []string {
		var got []string
		if err := s.ScanLive(ctx, f, 2, func(page []LiveRecord) error {
			for _, w := range page {
				got = append(got, w.Name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if d := cmp.Diff([]string{"stopping-uid"}, scan(ScanFilter{States: []State{StateStopping}})); d != "" {
		t.Errorf("stopping (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"created-nouid", "starting-nouid"}, scan(ScanFilter{States: []State{StateCreated, StateStarting}, NoUID: true})); d != "" {
		t.Errorf("created or starting without a UID (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"created-nouid", "running-nouid", "starting-nouid"}, scan(ScanFilter{NoUID: true})); d != "" {
		t.Errorf("without a UID (-want +got):\n%s", d)
	}
}

// TestHeads: the state, UID, last change and cluster of the records asked
// for, in one query; an ID with no record is absent.
func TestHeads(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	a, b := workload("ns", "job", "a"), workload("ns", "job", "b")
	a.UID, b.State = "u-a", StateRunning
	mustPut(t, s, a)
	mustPut(t, s, b)
	if err := s.SetCluster(ctx, b.RuntimeID, "https://b"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Heads(ctx, []string{a.RuntimeID, b.RuntimeID, "k8s-ns|job|none"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Head{}
	for id, cl := range map[string]string{a.RuntimeID: "", b.RuntimeID: "https://b"} {
		w, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = Head{State: w.State, UID: w.UID, UpdatedAt: w.UpdatedAt, Cluster: cl}
	}
	if want[a.RuntimeID].UID != "u-a" || want[b.RuntimeID].State != StateRunning {
		t.Fatalf("records as put: %+v", want)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("heads (-want +got):\n%s", d)
	}
}

// TestLiveScopesReadsTableInOrder: LiveScopes walks the workloads table in
// its own order, not the workloads_state index with a look-up in the table
// for every record (what SQLite chose for the LEFT JOIN with clusters).
func TestLiveScopesReadsTableInOrder(t *testing.T) {
	s, _ := openTest(t)
	rows, err := s.db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+liveScopesQuery)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	scan := false
	for _, d := range plan {
		if strings.HasPrefix(d, "SCAN w") {
			scan = !strings.Contains(d, "INDEX")
		}
	}
	if !scan {
		t.Errorf("LiveScopes does not read the workloads table in order; plan:\n%s", strings.Join(plan, "\n"))
	}
}
