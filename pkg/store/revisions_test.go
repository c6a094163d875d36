package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func revisionNumbers(t *testing.T, s *Store, id string) (nums []int, images []string, changes []string) {
	t.Helper()
	revs, err := s.Revisions(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs {
		nums = append(nums, r.Revision)
		images = append(images, r.Spec.Image)
		changes = append(changes, r.Change)
	}
	return nums, images, changes
}

// A record's first update writes the spec it was made with as revision 1
// and the new one as revision 2, with the SpecUpdated event, in one
// transaction; an update that rolls out makes a running record starting
// and forgets the run's result, one that does not keeps the state and the
// request that stands.
func TestUpdateSpecRevisions(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "deployment", "web")
	mustPut(t, s, w)
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: w.RuntimeID, Type: ContainerStarted, UID: "u1"}); err != nil {
		t.Fatal(err)
	}
	nums, images, changes := revisionNumbers(t, s, w.RuntimeID)
	if diff := cmp.Diff([]int{1}, nums); diff != "" || images[0] != "nginx:1.27" || changes[0] != ChangeCreated {
		t.Fatalf("before any update: %v %v %v", nums, images, changes)
	}

	next := w.Spec
	next.Image = "nginx:1.28"
	a, rev, err := s.UpdateSpec(ctx, Transition{RuntimeID: w.RuntimeID, Type: SpecUpdated, Expect: ContainerStarted, Message: "image"}, next, "image nginx:1.27 → nginx:1.28")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Applied || a.Workload.State != StateStarting || a.Workload.Epoch != 2 || a.Workload.Request != SpecUpdated || a.Workload.StartedAt != nil {
		t.Errorf("after a rollout: %+v", a.Workload)
	}
	if rev.Revision != 2 || rev.Epoch != 2 {
		t.Errorf("revision %d epoch %d, want 2 and 2", rev.Revision, rev.Epoch)
	}
	got, err := s.Get(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Image != "nginx:1.28" {
		t.Errorf("record's image %q, want nginx:1.28", got.Spec.Image)
	}
	nums, images, changes = revisionNumbers(t, s, w.RuntimeID)
	if diff := cmp.Diff([]int{1, 2}, nums); diff != "" {
		t.Errorf("revisions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"nginx:1.27", "nginx:1.28"}, images); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	if changes[1] != "image nginx:1.27 → nginx:1.28" {
		t.Errorf("change %q", changes[1])
	}

	// Sent again (the same spec): an event, no revision.
	if _, rev, err := s.UpdateSpec(ctx, Transition{RuntimeID: w.RuntimeID, Type: SpecUpdated, Expect: ContainerStarted}, next, "again"); err != nil || rev.Revision != 2 {
		t.Errorf("sent again: revision %d, %v; want 2", rev.Revision, err)
	}
	if nums, _, _ := revisionNumbers(t, s, w.RuntimeID); len(nums) != 2 {
		t.Errorf("sent again wrote a revision: %v", nums)
	}
	if n := countEvents(t, s.db, w.RuntimeID, SpecUpdated); n != 2 {
		t.Errorf("%d SpecUpdated events, want 2", n)
	}

	// A job stopping: the update keeps the state and the stop's
	// expectation, so the job's deletion still ends the stop.
	j := workload("default", "job", "task")
	j.UID = "j1"
	mustPut(t, s, j)
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: j.RuntimeID, Type: StopRequested, Expect: ContainerDeleted}); err != nil {
		t.Fatal(err)
	}
	jn := j.Spec
	jn.Env = map[string]string{"A": "2"}
	a, _, err = s.UpdateSpec(ctx, Transition{RuntimeID: j.RuntimeID, Type: SpecUpdated}, jn, "env A")
	if err != nil {
		t.Fatal(err)
	}
	if a.Workload.State != StateStopping || a.Workload.Request != StopRequested || a.Workload.Expect != ContainerDeleted || a.Workload.Epoch != 3 {
		t.Errorf("job after an update while stopping: %+v", a.Workload)
	}
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: j.RuntimeID, Type: ContainerDeleted, UID: "j1"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, j.RuntimeID); got.State != StateExited || got.Spec.Env["A"] != "2" {
		t.Errorf("job after its deletion: %s %v, want exited with A=2", got.State, got.Spec.Env)
	}

	if _, _, err := s.UpdateSpec(ctx, Transition{RuntimeID: "k8s-x|job|none", Type: SpecUpdated}, jn, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown ID: %v", err)
	}
	if _, err := s.Revisions(ctx, "k8s-x|job|none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Revisions of an unknown ID: %v", err)
	}
}

// A refused update takes its revision back with the RequestFailed, and the
// record keeps its spec; a record made again after a deletion shows its new
// spec as the next revision, written at its first update.
func TestRevertSpecAndCreatedAgain(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "deployment", "web")
	mustPut(t, s, w)
	next := w.Spec
	next.Image = "nginx:1.28"
	a, _, err := s.UpdateSpec(ctx, Transition{RuntimeID: w.RuntimeID, Type: SpecUpdated, Expect: ContainerStarted}, next, "image")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevertSpec(ctx, Transition{RuntimeID: w.RuntimeID, Type: RequestFailed, Epoch: a.Workload.Epoch, Restore: StateCreated, RestoreRequest: Created, Message: "refused"}, a.Workload.Epoch); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Image != "nginx:1.27" || got.State != StateCreated {
		t.Errorf("after a refused update: %s %s, want nginx:1.27, created", got.Spec.Image, got.State)
	}
	nums, images, _ := revisionNumbers(t, s, w.RuntimeID)
	if diff := cmp.Diff([]int{1}, nums); diff != "" || images[0] != "nginx:1.27" {
		t.Errorf("revisions after a refused update: %v %v", nums, images)
	}

	// Deleted, made again with another image, then updated.
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: w.RuntimeID, Type: DeleteRequested}); err != nil {
		t.Fatal(err)
	}
	again := w
	again.Spec.Image = "nginx:1.29"
	mustPut(t, s, again)
	nums, images, changes := revisionNumbers(t, s, w.RuntimeID)
	if diff := cmp.Diff([]string{"nginx:1.27", "nginx:1.29"}, images); diff != "" || changes[1] != ChangeCreatedAgain {
		t.Errorf("made again: %v %v %v", nums, images, changes)
	}
	last := again.Spec
	last.Image = "nginx:1.30"
	if _, rev, err := s.UpdateSpec(ctx, Transition{RuntimeID: w.RuntimeID, Type: SpecUpdated}, last, "image"); err != nil || rev.Revision != 3 {
		t.Fatalf("update after made again: revision %d, %v; want 3", rev.Revision, err)
	}
	if _, images, _ := revisionNumbers(t, s, w.RuntimeID); !cmp.Equal([]string{"nginx:1.27", "nginx:1.29", "nginx:1.30"}, images) {
		t.Errorf("revisions after made again and updated: %v", images)
	}
	var rows int
	if err := s.db.QueryRow("SELECT count(*) FROM revisions WHERE runtime_id = ?", w.RuntimeID).Scan(&rows); err != nil || rows != 3 {
		t.Errorf("%d revision rows, %v; want 3", rows, err)
	}
}

// TestMigrateSchema4 opens a file written by schema 4: its records have no
// revision rows, show their spec as revision 1, and take updates.
func TestMigrateSchema4(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	qs := []string{}
	for _, m := range migrations[:4] {
		qs = append(qs, m.sql)
	}
	qs = append(qs, "PRAGMA user_version = 4",
		`INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, spec, state, message, epoch, request, expect, created_at, updated_at) VALUES
		 ('k8s-default|deployment|web', 'k8s', 'default', 'deployment', 'web', 'u1', '{"name":"web","image":"nginx:1.27"}', 'running', '', 2, 'StartRequested', '', 5, 6)`,
		`INSERT INTO events (runtime_id, type, message, uid, epoch, observed, time) VALUES
		 ('k8s-default|deployment|web', 'Created', '', 'u1', 1, 0, 5)`)
	for _, q := range qs {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, _ := openAt(t, path)
	if v, err := s.SchemaVersion(ctx); err != nil || v != SchemaLatest() {
		t.Fatalf("schema %d, %v; want %d", v, err, SchemaLatest())
	}
	revs, err := s.Revisions(ctx, "k8s-default|deployment|web")
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 1 || revs[0].Revision != 1 || revs[0].Spec.Image != "nginx:1.27" || !revs[0].CreatedAt.Equal(fromDB(5)) {
		t.Fatalf("migrated revisions: %+v", revs)
	}
	w, _ := s.Get(ctx, "k8s-default|deployment|web")
	next := w.Spec
	next.Image = "nginx:1.28"
	if _, rev, err := s.UpdateSpec(ctx, Transition{RuntimeID: w.RuntimeID, Type: SpecUpdated, Expect: ContainerStarted}, next, "image"); err != nil || rev.Revision != 2 || rev.Epoch != 3 {
		t.Fatalf("update of a migrated record: %+v, %v", rev, err)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
	// The revisions go with their record.
	if err := s.Forget(ctx, w.RuntimeID, 3); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM revisions").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d revision rows left after the record was forgotten, %v", n, err)
	}
}

func TestNextSpecUpdated(t *testing.T) {
	for _, tt := range []struct {
		cur    State
		expect EventType
		want   State
	}{
		{StateRunning, ContainerStarted, StateStarting},
		{StateFailed, ContainerStarted, StateStarting},
		{StateCreated, ContainerStarted, StateStarting},
		{StateRunning, "", StateRunning},
		{StateExited, "", StateExited},
		{StateStopping, "", StateStopping},
		{StatePaused, "", StatePaused},
	} {
		got, rec := Next(tt.cur, SpecUpdated, tt.expect)
		if got != tt.want || !rec {
			t.Errorf("Next(%s, SpecUpdated, %q) = %s, %v; want %s, true", tt.cur, tt.expect, got, rec, tt.want)
		}
	}
}
