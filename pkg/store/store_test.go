package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable time source for Store.now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openTest opens a new store in a temp dir with a clock fixed at t0.
func openTest(t testing.TB) (*Store, *clock) {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "state.db"))
}

func openAt(t testing.TB, path string) (*Store, *clock) {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	c := &clock{t: t0}
	s.now = c.now
	return s, c
}

func workload(ns, kind, name string) Workload {
	return Workload{
		RuntimeID: "k8s-" + ns + "|" + kind + "|" + name,
		Runtime:   "k8s",
		Namespace: ns,
		Kind:      kind,
		Name:      name,
		Spec:      spec.ContainerSpec{Name: name, Image: "nginx:1.27", WorkloadKind: kind, Env: map[string]string{"A": "1"}},
	}
}

func mustPut(t testing.TB, s *Store, w Workload) {
	t.Helper()
	if err := s.Put(context.Background(), w, Transition{Type: Created, Message: "created"}); err != nil {
		t.Fatalf("Put(%s): %v", w.RuntimeID, err)
	}
}

func TestOpenCreatesSchema(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "gobrave", "state")
	path := filepath.Join(dir, "state.db")
	s, _ := openAt(t, path)

	if got := s.Path(); got != path {
		t.Errorf("Path() = %q, want %q", got, path)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != schemaLatest || v < 1 {
		t.Errorf("SchemaVersion() = %d, want %d", v, schemaLatest)
	}
	var names []string
	rows, err := s.db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	want := []string{"clusters", "events", "lease_owners", "leases", "leases_owner",
		"revisions", "workloads", "workloads_name", "workloads_namespace", "workloads_state"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("schema objects (-want +got):\n%s", diff)
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "synchronous": "1", "busy_timeout": "10000"} {
		var got string
		if err := s.db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Errorf("IntegrityCheck() = %v", err)
	}

	if runtime.GOOS == "windows" {
		return
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %v, want %v", p, got, want)
		}
	}
}

func TestReopenIsNoop(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := openAt(t, path)
	w := workload("default", "deployment", "web")
	mustPut(t, s, w)
	before, err := s.Get(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		s2, _ := openAt(t, path)
		v, err := s2.SchemaVersion(ctx)
		if err != nil || v != schemaLatest {
			t.Fatalf("reopen %d: SchemaVersion() = %d, %v; want %d", i, v, err, schemaLatest)
		}
		got, err := s2.Get(ctx, w.RuntimeID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, got); diff != "" {
			t.Errorf("reopen %d changed the record (-before +after):\n%s", i, diff)
		}
		s2.Close()
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := openAt(t, path)
	newer := schemaLatest + 1
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", newer)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	_, err := Open(ctx, path)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open() = %v, want ErrNewerSchema", err)
	}
	want := fmt.Sprintf("state database %s was written by a newer kubectl-gobrave (schema %d, this binary knows %d): upgrade the plugin or use --state-db", path, newer, schemaLatest)
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestOpenRefusesDamagedFiles(t *testing.T) {
	ctx := context.Background()
	random := make([]byte, 8192)
	rand.Read(random)

	// database writes a real database with enough rows for several pages.
	database := func(t *testing.T) []byte {
		path := filepath.Join(t.TempDir(), "good.db")
		s, _ := openAt(t, path)
		for i := range 200 {
			mustPut(t, s, workload("default", "deployment", fmt.Sprintf("web-%03d", i)))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 8*4096 {
			t.Fatalf("test database is only %d bytes", len(b))
		}
		return b
	}

	tests := []struct {
		name    string
		content func(t *testing.T) []byte
	}{
		{"random bytes", func(*testing.T) []byte { return random }},
		{"text file", func(*testing.T) []byte { return []byte("workloads:\n- web\n") }},
		{"header only", func(*testing.T) []byte { return []byte("SQLite format 3\x00") }},
		{"header then garbage", func(*testing.T) []byte { return append([]byte("SQLite format 3\x00"), random...) }},
		{"truncated inside the first page", func(t *testing.T) []byte { return database(t)[:1000] }},
		{"truncated after the first pages", func(t *testing.T) []byte { return database(t)[:3*4096] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(path, tt.content(t), 0o600); err != nil {
				t.Fatal(err)
			}
			// A damaged file is refused by Open, or by the first read of the
			// damaged pages and the integrity check.
			s, err := Open(ctx, path)
			if err == nil {
				defer s.Close()
				if _, err = s.List(ctx, Filter{All: true}); err == nil {
					err = s.IntegrityCheck(ctx)
				}
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			for _, want := range []string{path, "move it aside or point --state-db elsewhere"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestOpenReadOnly(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("file modes do not stop root or windows")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := openAt(t, path)
	s.Close()
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, path)
	if err == nil || !strings.Contains(err.Error(), "not writable") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(read-only file) = %v, want a not writable error naming the file", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Open(ctx, ""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	if _, err := Open(ctx, dir); err == nil {
		t.Error("Open(a directory) succeeded")
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, filepath.Join(file, "state.db")); err == nil {
		t.Error("Open(under a file) succeeded")
	}
}

func TestOpenPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%20 d", "state.db")
	s, _ := openAt(t, path)
	mustPut(t, s, workload("default", "job", "j"))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at %s: %v", path, err)
	}
}

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name    string
		files   []string
		want    []int
		wantErr string
	}{
		{name: "ordered", files: []string{"0002_b.sql", "0001_a.sql"}, want: []int{1, 2}},
		{name: "gap", files: []string{"0001_a.sql", "0003_c.sql"}, wantErr: "expected version 2"},
		{name: "no number", files: []string{"init.sql"}, wantErr: "must start with a version number"},
		{name: "zero", files: []string{"0000_a.sql"}, wantErr: "must start with a version number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tt.files {
				fsys["migrations/"+f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
			}
			ms, err := loadMigrations(fsys)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
		})
	}
	if len(migrations) != schemaLatest || schemaLatest < 1 {
		t.Errorf("embedded migrations: %d, schemaLatest %d", len(migrations), schemaLatest)
	}
}

func TestPutGetList(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)

	ws := []Workload{
		workload("prod", "deployment", "web"),
		workload("default", "job", "import"),
		workload("default", "deployment", "web"),
		workload("default", "deployment", "api"),
	}
	k3s := workload("default", "deployment", "web")
	k3s.RuntimeID, k3s.Runtime = "k3s-default|deployment|web", "k3s"
	ws = append(ws, k3s)
	for _, w := range ws {
		mustPut(t, s, w)
	}
	// One terminal and one running workload.
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: "k8s-default|job|import", Type: ContainerFailed, Message: "exit code 2"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: "k8s-prod|deployment|web", Type: ContainerStarted, UID: "u-prod"}); err != nil {
		t.Fatal(err)
	}

	got, err := s.Get(ctx, "k8s-default|deployment|api")
	if err != nil {
		t.Fatal(err)
	}
	want := workload("default", "deployment", "api")
	want.State, want.Message, want.Epoch, want.Request, want.CreatedAt, want.UpdatedAt = StateCreated, "created", 1, Created, t0, t0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}

	ids := func(ws []Workload) []string {
		out := []string{}
		for _, w := range ws {
			out = append(out, w.RuntimeID)
		}
		return out
	}
	tests := []struct {
		name   string
		filter Filter
		want   []string
	}{
		{"active", Filter{}, []string{"k8s-default|deployment|api", "k3s-default|deployment|web", "k8s-default|deployment|web", "k8s-prod|deployment|web"}},
		{"all", Filter{All: true}, []string{"k8s-default|deployment|api", "k3s-default|deployment|web", "k8s-default|deployment|web", "k8s-default|job|import", "k8s-prod|deployment|web"}},
		{"states", Filter{States: []State{StateFailed, StateRunning}}, []string{"k8s-default|job|import", "k8s-prod|deployment|web"}},
		{"states override all", Filter{All: true, States: []State{StateFailed}}, []string{"k8s-default|job|import"}},
		{"namespace", Filter{Namespace: "prod"}, []string{"k8s-prod|deployment|web"}},
		{"kind", Filter{All: true, Kind: "job"}, []string{"k8s-default|job|import"}},
		{"terminal hidden", Filter{Kind: "job"}, []string{}},
		{"runtime", Filter{Runtime: "k3s"}, []string{"k3s-default|deployment|web"}},
		{"name", Filter{Name: "web"}, []string{"k3s-default|deployment|web", "k8s-default|deployment|web", "k8s-prod|deployment|web"}},
		{"name and namespace", Filter{Name: "web", Namespace: "default", Runtime: "k8s"}, []string{"k8s-default|deployment|web"}},
		{"nothing", Filter{Namespace: "nope"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := s.List(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ids(ws)); diff != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", tt.filter, diff)
			}
		})
	}

	byName, err := s.FindByName(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"k3s-default|deployment|web", "k8s-default|deployment|web", "k8s-prod|deployment|web"}, ids(byName)); diff != "" {
		t.Errorf("FindByName (-want +got):\n%s", diff)
	}
}

func TestGetNotFound(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	const id = "k8s-default|deployment|nope"
	_, err := s.Get(ctx, id)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get() = %v, want ErrNotFound", err)
	}
	want := `runtime ID "k8s-default|deployment|nope" is not in the state database (see 'kubectl gobrave ps -a')`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if err := s.SetUID(ctx, id, "u"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetUID() = %v, want ErrNotFound", err)
	}
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: id, Type: StopRequested}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Apply() = %v, want ErrNotFound", err)
	}
}

func TestPutValidates(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "deployment", "web")
	tests := []struct {
		name    string
		w       Workload
		ev      Transition
		wantErr string
	}{
		{"no runtime ID", Workload{}, Transition{}, "empty runtime ID"},
		{"other runtime ID", w, Transition{RuntimeID: "k8s-x|job|y"}, "event is for runtime ID"},
		{"unknown state", func() Workload { w := w; w.State = "sleeping"; return w }(), Transition{}, "unknown state"},
		{"unknown event", w, Transition{Type: "Exploded"}, "unknown event type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Put(ctx, tt.w, tt.ev)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Put() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPutResetsRecordAndKeepsHistory(t *testing.T) {
	ctx := context.Background()
	s, c := openTest(t)
	w := workload("default", "deployment", "web")
	w.UID = "uid-1"
	mustPut(t, s, w)
	for _, tr := range []Transition{
		{Type: StartRequested},
		{Type: ContainerStarted, Message: "1/1 ready"},
		{Type: DeleteRequested},
		{Type: ContainerDeleted},
	} {
		tr.RuntimeID = w.RuntimeID
		if _, _, err := s.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}

	c.add(time.Hour)
	t1 := t0.Add(time.Hour)
	w2 := w
	w2.UID = "uid-2"
	w2.Spec.Image = "nginx:1.28"
	if err := s.Put(ctx, w2, Transition{Message: "created again"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	want := w2
	want.State, want.Message, want.Epoch, want.Request, want.CreatedAt, want.UpdatedAt = StateCreated, "created again", 4, Created, t1, t1
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reset record (-want +got):\n%s", diff)
	}

	evs, err := s.Events(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	id := w.RuntimeID
	wantEvs := []Event{
		{Seq: 1, RuntimeID: id, Type: Created, Message: "created", UID: "uid-1", Time: t0},
		{Seq: 2, RuntimeID: id, Type: StartRequested, UID: "uid-1", Time: t0},
		{Seq: 3, RuntimeID: id, Type: ContainerStarted, Message: "1/1 ready", UID: "uid-1", Time: t0},
		{Seq: 4, RuntimeID: id, Type: DeleteRequested, UID: "uid-1", Time: t0, Result: Result{Reason: ReasonDeleted}},
		{Seq: 5, RuntimeID: id, Type: ContainerDeleted, UID: "uid-1", Time: t0, Result: Result{Reason: ReasonDeleted}},
		{Seq: 6, RuntimeID: id, Type: Created, Message: "created again", UID: "uid-2", Time: t1},
	}
	if diff := cmp.Diff(wantEvs, evs); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}

	// The old object's late events no longer touch the record.
	ev, ok, err := s.Apply(ctx, Transition{RuntimeID: id, Type: ContainerDeleted, UID: "uid-1"})
	if err != nil || ok || ev.Seq != 0 {
		t.Errorf("Apply(old UID) = %+v, %v, %v; want not applied", ev, ok, err)
	}
	// The new object starts afresh: its start is recorded.
	if _, ok, err := s.Apply(ctx, Transition{RuntimeID: id, Type: ContainerStarted, UID: "uid-2"}); err != nil || !ok {
		t.Errorf("Apply(new UID started) = %v, %v; want applied", ok, err)
	}
}

func TestSetUIDAndEvents(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	a, b := workload("default", "deployment", "a"), workload("default", "job", "b")
	mustPut(t, s, a)
	mustPut(t, s, b)
	if err := s.SetUID(ctx, a.RuntimeID, "uid-a"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, a.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "uid-a" {
		t.Errorf("UID = %q, want uid-a", got.UID)
	}
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: b.RuntimeID, Type: StartRequested}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: a.RuntimeID, Type: StartRequested, Time: t0.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}

	seqs := func(evs []Event) []string {
		out := []string{}
		for _, e := range evs {
			out = append(out, fmt.Sprintf("%d %s %s", e.Seq, e.RuntimeID, e.Type))
		}
		return out
	}
	all, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1 k8s-default|deployment|a Created",
		"2 k8s-default|job|b Created",
		"3 k8s-default|job|b StartRequested",
		"4 k8s-default|deployment|a StartRequested",
	}
	if diff := cmp.Diff(want, seqs(all)); diff != "" {
		t.Errorf("Events() (-want +got):\n%s", diff)
	}
	if all[3].Time != t0.Add(-time.Minute) || all[3].UID != "uid-a" {
		t.Errorf("event 4 = %+v, want the given time and the workload's UID", all[3])
	}
	onlyB, err := s.Events(ctx, b.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1:3], seqs(onlyB)); diff != "" {
		t.Errorf("Events(b) (-want +got):\n%s", diff)
	}
	since, err := s.EventsSince(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[2:], seqs(since)); diff != "" {
		t.Errorf("EventsSince(2) (-want +got):\n%s", diff)
	}
	page, err := s.EventsPage(ctx, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1:3], seqs(page)); diff != "" {
		t.Errorf("EventsPage(1, 2) (-want +got):\n%s", diff)
	}
	none, err := s.EventsSince(ctx, 4)
	if err != nil || len(none) != 0 {
		t.Errorf("EventsSince(4) = %v, %v; want none", none, err)
	}
	if last, err := s.LastEventSeq(ctx); last != 4 || err != nil {
		t.Errorf("LastEventSeq() = %d, %v; want 4", last, err)
	}
}

// TestConcurrentStores has 8 stores of one process write to one file at
// once; TestConcurrentProcesses does the same from 8 processes.
func TestConcurrentStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	const writers, writes = 8, 200

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	start := make(chan struct{})
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := Open(ctx, path)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if err := writeLoad(ctx, s, i, writes); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkLoad(t, path, writers, writes)
}

// writeLoad is writer i's share of the concurrent load: records of its own
// (created, started, observed running and exited) and a shared record that
// every writer leases and updates.
func writeLoad(ctx context.Context, s *Store, i, writes int) error {
	shared := workload("default", "deployment", "shared")
	for j := range writes {
		w := workload("default", "job", fmt.Sprintf("w%d-%d", i, j/4))
		var err error
		switch j % 4 {
		case 0:
			err = s.Put(ctx, w, Transition{Type: Created})
		case 1:
			_, _, err = s.Apply(ctx, Transition{RuntimeID: w.RuntimeID, Type: StartRequested})
		case 2:
			_, err = s.ApplyBatch(ctx, []Transition{
				{RuntimeID: w.RuntimeID, Type: ContainerStarted, UID: "u"},
				{RuntimeID: w.RuntimeID, Type: ContainerExited},
			})
		case 3:
			// Everybody works on the same record too.
			if j == 3 {
				err = s.Put(ctx, shared, Transition{})
			} else if _, err = s.AcquireLeases(ctx, Owner{ID: fmt.Sprint(i), PID: os.Getpid()}, []string{shared.RuntimeID}, time.Minute); err == nil {
				_, _, err = s.Apply(ctx, Transition{RuntimeID: shared.RuntimeID, Type: ContainerStarted, UID: "s"})
			}
		}
		if err != nil {
			return fmt.Errorf("writer %d, write %d: %w", i, j, err)
		}
	}
	return nil
}

// checkLoad checks the file after writers ran writeLoad: intact, every
// record exited in its second epoch, every event there exactly once.
func checkLoad(t *testing.T, path string, writers, writes int) {
	t.Helper()
	ctx := context.Background()
	s, _ := openAt(t, path)
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	ws, err := s.List(ctx, Filter{All: true, Kind: "job"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.State != StateExited || w.Epoch != 2 {
			t.Errorf("%s: state %s, epoch %d; want exited, epoch 2", w.RuntimeID, w.State, w.Epoch)
		}
	}
	if len(ws) != writers*writes/4 {
		t.Errorf("%d job records, want %d", len(ws), writers*writes/4)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM events WHERE runtime_id LIKE '%|job|%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	// Per job: Created, StartRequested, ContainerStarted, ContainerExited.
	if want := writers * writes / 4 * 4; n != want {
		t.Errorf("%d job events, want %d", n, want)
	}
}

// countEvents returns the number of events of the runtime ID and type.
func countEvents(t *testing.T, db *sql.DB, id string, typ EventType) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM events WHERE runtime_id = ? AND type = ?", id, string(typ)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecords reads many records at once without specs: more IDs than one
// query takes, some without a record.
func TestRecords(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	ids := fill(t, s, 1200)
	ask := append(slices.Clone(ids), "k8s-none|job|missing", "k8s-none|deployment|missing")
	recs, err := s.Records(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(ids) {
		t.Fatalf("%d records, want %d", len(recs), len(ids))
	}
	for i, id := range ids {
		w, ok := recs[id]
		wantState := StateRunning
		if i%3 == 0 {
			wantState = StateExited
		}
		if !ok || w.State != wantState || w.UID != fmt.Sprintf("uid-%d", i) || w.Spec.Image != "" {
			t.Fatalf("%s: %+v (found %v), want state %s, uid-%d and no spec", id, w, ok, wantState, i)
		}
	}
	if _, ok := recs["k8s-none|job|missing"]; ok {
		t.Error("a record for an unknown ID")
	}
	if recs, err := s.Records(ctx, nil); err != nil || len(recs) != 0 {
		t.Errorf("Records(nil) = %v, %v", recs, err)
	}
}

// TestMigrateSchema1 opens a file written by schema 1 (run, no request):
// the counter becomes the epoch, the last request is read back from the
// history, and a job stopping at the time still ends exited when its
// deletion comes.
func TestMigrateSchema1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		migrations[0].sql,
		"PRAGMA user_version = 1",
		`INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, spec, state, message, run, created_at, updated_at)
		 VALUES ('k8s-default|job|j', 'k8s', 'default', 'job', 'j', 'u1', '{}', 'stopping', '', 2, 0, 0)`,
		`INSERT INTO events (runtime_id, type, message, uid, run, observed, time) VALUES
		 ('k8s-default|job|j', 'Created', '', 'u1', 1, 0, 0),
		 ('k8s-default|job|j', 'StartRequested', '', 'u1', 2, 0, 1),
		 ('k8s-default|job|j', 'ContainerStarted', '', 'u1', 2, 1, 2),
		 ('k8s-default|job|j', 'StopRequested', '', 'u1', 2, 0, 3)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, _ := openAt(t, path)
	if v, err := s.SchemaVersion(ctx); err != nil || v != SchemaLatest() {
		t.Fatalf("schema %d, %v; want %d", v, err, SchemaLatest())
	}
	w, err := s.Get(ctx, "k8s-default|job|j")
	if err != nil {
		t.Fatal(err)
	}
	if w.Epoch != 2 || w.Request != StopRequested || w.Expect != ContainerDeleted {
		t.Errorf("migrated record epoch %d request %q expect %q; want 2, StopRequested, ContainerDeleted", w.Epoch, w.Request, w.Expect)
	}
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: w.RuntimeID, Type: ContainerDeleted, UID: "u1"}); err != nil {
		t.Fatal(err)
	}
	if w, _ := s.Get(ctx, w.RuntimeID); w.State != StateExited || w.Message != "stopped" {
		t.Errorf("after the deletion: %s %q, want exited, stopped", w.State, w.Message)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

// PutAdopted never replaces a record that knows another object unless told
// to; the refusal writes nothing.
func TestPutAdoptedKeepsAnotherUID(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "job", "task")
	w.UID = "uid-mine"
	w.Spec.Image = "busybox"
	mustPut(t, s, w)
	before, err := s.Events(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}

	planted := w
	planted.UID = "uid-planted"
	planted.Spec.Image = "evil:1"
	err = s.PutAdopted(ctx, planted, Transition{Type: Adopted}, false)
	var other *OtherUIDError
	if !errors.As(err, &other) || !errors.Is(err, ErrOtherUID) || other.Recorded != "uid-mine" || other.Found != "uid-planted" {
		t.Fatalf("PutAdopted over another UID: %v", err)
	}
	got, err := s.Get(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "uid-mine" || got.Spec.Image != "busybox" || got.Epoch != 1 {
		t.Errorf("record after a refused adopt: %+v", got)
	}
	after, err := s.Events(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("a refused adopt added events: %d -> %d", len(before), len(after))
	}

	// The same UID, a new ID and replace=true are written.
	if err := s.PutAdopted(ctx, w, Transition{Type: Adopted}, false); err != nil {
		t.Errorf("PutAdopted of the same UID: %v", err)
	}
	fresh := workload("default", "job", "other")
	fresh.UID = "uid-other"
	if err := s.PutAdopted(ctx, fresh, Transition{Type: Adopted}, false); err != nil {
		t.Errorf("PutAdopted of a new ID: %v", err)
	}
	if err := s.PutAdopted(ctx, planted, Transition{Type: Adopted}, true); err != nil {
		t.Fatalf("PutAdopted with replace: %v", err)
	}
	if got, _ := s.Get(ctx, w.RuntimeID); got.UID != "uid-planted" {
		t.Errorf("replace did not replace: %+v", got)
	}
}

// TestMigrateSchema2 opens a file written by schema 2 (the release before
// structured results): the records and events gain their reasons, exit
// codes and times from what the history says structurally, and the new
// ContainerWaiting events are recorded per reason while the other observed
// events stay once per object, type and epoch.
func TestMigrateSchema2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		migrations[0].sql,
		migrations[1].sql,
		"PRAGMA user_version = 2",
		`INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, spec, state, message, epoch, request, expect, created_at, updated_at) VALUES
		 ('k8s-default|job|done', 'k8s', 'default', 'job', 'done', 'u1', '{}', 'exited', '0', 2, 'StartRequested', '', 0, 0),
		 ('k8s-default|deployment|web', 'k8s', 'default', 'deployment', 'web', 'u2', '{}', 'exited', '0', 3, 'StopRequested', '', 0, 0),
		 ('k8s-default|deployment|gone', 'k8s', 'default', 'deployment', 'gone', 'u3', '{}', 'deleted', '', 2, 'DeleteRequested', '', 0, 0),
		 ('k8s-default|deployment|up', 'k8s', 'default', 'deployment', 'up', 'u4', '{}', 'running', '', 2, 'StartRequested', '', 0, 0)`,
		`INSERT INTO events (runtime_id, type, message, uid, epoch, observed, time) VALUES
		 ('k8s-default|job|done', 'Created', '', 'u1', 1, 0, 0),
		 ('k8s-default|job|done', 'StartRequested', '', 'u1', 2, 0, 1),
		 ('k8s-default|job|done', 'ContainerStarted', '', 'u1', 2, 1, 2),
		 ('k8s-default|job|done', 'ContainerExited', '0', 'u1', 2, 1, 3),
		 ('k8s-default|deployment|gone', 'DeleteRequested', '', 'u3', 2, 0, 4),
		 ('k8s-default|deployment|up', 'ContainerStarted', '', 'u4', 2, 1, 5)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, _ := openAt(t, path)
	if v, err := s.SchemaVersion(ctx); err != nil || v != SchemaLatest() {
		t.Fatalf("schema %d, %v; want %d", v, err, SchemaLatest())
	}
	recs, err := s.Records(ctx, []string{"k8s-default|job|done", "k8s-default|deployment|web", "k8s-default|deployment|gone", "k8s-default|deployment|up"})
	if err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	at := func(n int64) *time.Time { t := fromDB(n); return &t }
	want := map[string]Result{
		"k8s-default|job|done":        {Reason: "Completed", ExitCode: &zero, StartedAt: at(2), FinishedAt: at(3)},
		"k8s-default|deployment|web":  {Reason: ReasonStopped},
		"k8s-default|deployment|gone": {Reason: ReasonDeleted},
		"k8s-default|deployment|up":   {StartedAt: at(5)},
	}
	for id, r := range want {
		if diff := cmp.Diff(r, recs[id].Result); diff != "" {
			t.Errorf("%s: migrated result (-want +got):\n%s", id, diff)
		}
	}
	evs, err := s.Events(ctx, "k8s-default|job|done")
	if err != nil {
		t.Fatal(err)
	}
	if e := evs[len(evs)-1]; e.Type != ContainerExited || e.Reason != "Completed" || e.ExitCode == nil || *e.ExitCode != 0 {
		t.Errorf("migrated exit event %+v, want reason Completed, exit code 0", e)
	}

	// The migrated database takes the new events: a reason per change.
	id := "k8s-default|deployment|up"
	one := int32(1)
	for _, tr := range []Transition{
		{RuntimeID: id, Type: ContainerWaiting, UID: "u4", Message: "back-off", Result: Result{Reason: "CrashLoopBackOff", ExitCode: &one}},
		{RuntimeID: id, Type: ContainerWaiting, UID: "u4", Message: "back-off 20s", Result: Result{Reason: "CrashLoopBackOff", ExitCode: &one}},
		{RuntimeID: id, Type: ContainerStarted, UID: "u4"}, // already recorded in this epoch
	} {
		if _, _, err := s.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if n := countEvents(t, s.db, id, ContainerWaiting); n != 1 {
		t.Errorf("%d ContainerWaiting events for one reason, want 1", n)
	}
	if n := countEvents(t, s.db, id, ContainerStarted); n != 1 {
		t.Errorf("%d ContainerStarted events in one epoch, want 1", n)
	}
	w, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if w.State != StateRunning || w.Reason != "CrashLoopBackOff" || w.ExitCode == nil || *w.ExitCode != 1 || w.Message != "back-off" {
		t.Errorf("after a crash loop: %s %q %v %q, want running CrashLoopBackOff 1 back-off", w.State, w.Reason, w.ExitCode, w.Message)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

// TestMigrateSchema5 opens a file written by schema 5 (two indexes on
// events): events_key replaces them with the same uniqueness, the history
// stays in order, and the queries by record use the new index rather than
// scanning the events.
func TestMigrateSchema5(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, m := range migrations[:5] {
		qs = append(qs, m.sql)
	}
	id := "k8s-default|job|batch"
	qs = append(qs, "PRAGMA user_version = 5",
		`INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, spec, state, message, epoch, request, expect, created_at, updated_at) VALUES
		 ('k8s-default|job|batch', 'k8s', 'default', 'job', 'batch', 'u1', '{}', 'paused', '', 2, 'StartRequested', '', 0, 0)`,
		// Two suspensions in one epoch (observed = 0) and one start (observed = 1).
		`INSERT INTO events (runtime_id, type, message, uid, epoch, observed, time) VALUES
		 ('k8s-default|job|batch', 'Created', '', 'u1', 1, 0, 0),
		 ('k8s-default|job|batch', 'StartRequested', '', 'u1', 2, 0, 1),
		 ('k8s-default|job|batch', 'ContainerStarted', '', 'u1', 2, 1, 2),
		 ('k8s-default|job|batch', 'ContainerPaused', 'suspended', 'u1', 2, 0, 3),
		 ('k8s-default|job|batch', 'ContainerStarted', '', 'u1', 2, 0, 4),
		 ('k8s-default|job|batch', 'ContainerPaused', 'suspended', 'u1', 2, 0, 5)`)
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
	evs, err := s.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var types []EventType
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if diff := cmp.Diff([]EventType{Created, StartRequested, ContainerStarted, ContainerPaused, ContainerStarted, ContainerPaused}, types); diff != "" {
		t.Errorf("migrated history (-want +got):\n%s", diff)
	}

	// An observed event is still recorded once per object, type and epoch
	// (schema 9: by the writer, from the record's once columns).
	for range 2 {
		if _, err := execEvent(ctx, s, id, string(ContainerExited), "", "u1", 2, true, 7, "", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := countEvents(t, s.db, id, ContainerExited); n != 1 {
		t.Errorf("%d ContainerExited events in one epoch, want 1", n)
	}
	// The others are not: requested events, suspensions (observed = 0)
	// and waiting reasons, however many.
	for range 2 {
		for _, typ := range []EventType{ContainerWaiting, ContainerPaused} {
			if _, err := execEvent(ctx, s, id, string(typ), "", "u1", 2, typ == ContainerWaiting, 9, "", nil, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := countEvents(t, s.db, id, ContainerWaiting); n != 2 {
		t.Errorf("%d ContainerWaiting events, want 2", n)
	}
	if n := countEvents(t, s.db, id, ContainerPaused); n != 4 {
		t.Errorf("%d ContainerPaused events, want 4", n)
	}

	// Every query by record follows the chain by seq (schema 9) and never
	// scans the events.
	for _, q := range []string{
		historyQuery + " ORDER BY seq",
		seenBeforeQuery,
		onceQuery,
		fmt.Sprintf(chainOf, "?") + "DELETE FROM events WHERE seq IN (SELECT seq FROM chain)",
	} {
		plan := queryPlan(t, s.db, q)
		if strings.Contains(plan, "SCAN events") || strings.Contains(plan, "SCAN e ") || strings.Contains(plan, "SCAN e\n") {
			t.Errorf("plan of %s:\n%s\nwant no scan of events", q, plan)
		}
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

// queryPlan is EXPLAIN QUERY PLAN of q, one step a line.
func queryPlan(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	n := strings.Count(q, "?")
	args := make([]any, n)
	for i := range args {
		args[i] = "x"
	}
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String()
}
