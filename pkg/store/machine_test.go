package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/google/go-cmp/cmp"
)

func TestNext(t *testing.T) {
	const dep, job = "deployment", "job"
	type row struct {
		kind       string
		cur        State
		ev         EventType
		want       State
		wantRecord bool
	}
	tests := []row{
		// Requested events are always recorded.
		{dep, StateRunning, Created, StateCreated, true},
		{dep, StateCreated, StartRequested, StateStarting, true},
		{dep, StateExited, StartRequested, StateStarting, true},
		{job, StateFailed, StartRequested, StateStarting, true},
		{dep, StateStopping, ResumeRequested, StateStarting, true},
		{dep, StateRunning, StopRequested, StateStopping, true},
		{job, StateRunning, StopRequested, StateStopping, true},
		{dep, StateRunning, PauseRequested, StateStopping, true},
		{dep, StateRunning, DeleteRequested, StateDeleted, true},
		{job, StateExited, DeleteRequested, StateDeleted, true},
		{dep, StateRunning, Adopted, StateRunning, true},
		{job, StateExited, Adopted, StateExited, true},

		// ContainerStarted: only from created or starting.
		{dep, StateCreated, ContainerStarted, StateRunning, true},
		{dep, StateStarting, ContainerStarted, StateRunning, true},
		{job, StateStarting, ContainerStarted, StateRunning, true},
		{dep, StateRunning, ContainerStarted, StateRunning, false},
		{dep, StateStopping, ContainerStarted, StateStopping, false},
		{dep, StateExited, ContainerStarted, StateExited, false},
		{job, StateFailed, ContainerStarted, StateFailed, false},
		{dep, StateDeleted, ContainerStarted, StateDeleted, false},

		// ContainerExited and ContainerFailed: from any non-terminal state.
		{job, StateCreated, ContainerExited, StateExited, true},
		{job, StateStarting, ContainerExited, StateExited, true},
		{job, StateRunning, ContainerExited, StateExited, true},
		{dep, StateStopping, ContainerExited, StateExited, true},
		{job, StateExited, ContainerExited, StateExited, false},
		{job, StateFailed, ContainerExited, StateFailed, false},
		{job, StateDeleted, ContainerExited, StateDeleted, false},
		{job, StateCreated, ContainerFailed, StateFailed, true},
		{dep, StateStarting, ContainerFailed, StateFailed, true},
		{job, StateRunning, ContainerFailed, StateFailed, true},
		{job, StateStopping, ContainerFailed, StateFailed, true},
		{job, StateExited, ContainerFailed, StateExited, false},
		{job, StateFailed, ContainerFailed, StateFailed, false},
		{dep, StateDeleted, ContainerFailed, StateDeleted, false},

		// ContainerDeleted: a stopping job has exited; otherwise deleted.
		{job, StateStopping, ContainerDeleted, StateExited, true},
		{dep, StateStopping, ContainerDeleted, StateDeleted, true},
		{job, StateRunning, ContainerDeleted, StateDeleted, true},
		{dep, StateCreated, ContainerDeleted, StateDeleted, true},
		{dep, StateStarting, ContainerDeleted, StateDeleted, true},
		{job, StateExited, ContainerDeleted, StateExited, true},
		{job, StateFailed, ContainerDeleted, StateFailed, true},
		{dep, StateExited, ContainerDeleted, StateDeleted, true},
		{dep, StateFailed, ContainerDeleted, StateDeleted, true},
		{dep, StateDeleted, ContainerDeleted, StateDeleted, true},
		{job, StateDeleted, ContainerDeleted, StateDeleted, true},

		// ContainerWaiting: a reason for a starting or running workload, no move.
		{dep, StateCreated, ContainerWaiting, StateCreated, true},
		{dep, StateStarting, ContainerWaiting, StateStarting, true},
		{job, StateRunning, ContainerWaiting, StateRunning, true},
		{dep, StateStopping, ContainerWaiting, StateStopping, false},
		{job, StateExited, ContainerWaiting, StateExited, false},
		{job, StateFailed, ContainerWaiting, StateFailed, false},
		{dep, StateDeleted, ContainerWaiting, StateDeleted, false},

		// Unknown types change nothing.
		{dep, StateRunning, "Exploded", StateRunning, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %s", tt.kind, tt.cur, tt.ev), func(t *testing.T) {
			var expect EventType // what the kinds say: a job's stop ends with its deletion
			if tt.kind == job {
				expect = ContainerDeleted
			}
			next, record := Next(tt.cur, tt.ev, expect)
			if next != tt.want || record != tt.wantRecord {
				t.Errorf("Next(%s, %s, %s) = %s, %v; want %s, %v", tt.kind, tt.cur, tt.ev, next, record, tt.want, tt.wantRecord)
			}
		})
	}
}

// TestNextPaused is the paused state's part of the table, with the
// expectation the last request recorded (a job's pause ends with its
// suspension, its stop with its deletion).
func TestNextPaused(t *testing.T) {
	tests := []struct {
		cur        State
		ev, expect EventType
		want       State
		wantRecord bool
	}{
		// A suspension is seen while it runs, or completes a pause.
		{StateCreated, ContainerPaused, "", StatePaused, true},
		{StateStarting, ContainerPaused, "", StatePaused, true},
		{StateRunning, ContainerPaused, "", StatePaused, true},
		{StateStopping, ContainerPaused, ContainerPaused, StatePaused, true},
		// A stop deleting the job stands; nothing new when paused or ended.
		{StateStopping, ContainerPaused, ContainerDeleted, StateStopping, false},
		{StatePaused, ContainerPaused, ContainerPaused, StatePaused, false},
		{StateExited, ContainerPaused, "", StateExited, false},
		{StateFailed, ContainerPaused, "", StateFailed, false},
		{StateDeleted, ContainerPaused, "", StateDeleted, false},
		// Unsuspended, it runs again.
		{StatePaused, ContainerStarted, ContainerPaused, StateRunning, true},
		{StatePaused, ContainerStarted, "", StateRunning, true},
		// Requests from paused.
		{StatePaused, StartRequested, ContainerPaused, StateStarting, true},
		{StatePaused, ResumeRequested, ContainerPaused, StateStarting, true},
		{StatePaused, RestartRequested, ContainerPaused, StateStarting, true},
		{StatePaused, StopRequested, ContainerPaused, StateStopping, true},
		{StatePaused, PauseRequested, ContainerPaused, StateStopping, true},
		{StatePaused, DeleteRequested, ContainerPaused, StateDeleted, true},
		{StatePaused, RequestFailed, ContainerPaused, StatePaused, true},
		// A restart is a start.
		{StateRunning, RestartRequested, "", StateStarting, true},
		{StateFailed, RestartRequested, "", StateStarting, true},
		// Paused is not terminal: an end or a deletion is recorded.
		{StatePaused, ContainerExited, ContainerPaused, StateExited, true},
		{StatePaused, ContainerFailed, ContainerPaused, StateFailed, true},
		{StatePaused, ContainerDeleted, ContainerPaused, StateDeleted, true},
		{StatePaused, ContainerDeleted, "", StateDeleted, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s expect %s", tt.cur, tt.ev, tt.expect), func(t *testing.T) {
			next, record := Next(tt.cur, tt.ev, tt.expect)
			if next != tt.want || record != tt.wantRecord {
				t.Errorf("Next(%s, %s, %s) = %s, %v; want %s, %v", tt.cur, tt.ev, tt.expect, next, record, tt.want, tt.wantRecord)
			}
		})
	}
	if StatePaused.Terminal() {
		t.Error("paused is terminal; a suspended job must stay monitored")
	}
}

// TestSuspendToggles: a job suspended and unsuspended again and again within
// one request (Kueue's preemptions) is recorded paused and running each
// time, once per change even when two stores see every change.
func TestSuspendToggles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	a, _ := openAt(t, path)
	b, _ := openAt(t, path)
	w := workload("default", "job", "j")
	w.UID = "u"
	mustPut(t, a, w)
	id := w.RuntimeID
	for round := range 3 {
		for _, step := range []struct {
			typ  EventType
			want State
		}{{ContainerPaused, StatePaused}, {ContainerStarted, StateRunning}} {
			var wg sync.WaitGroup
			var mu sync.Mutex
			applied := 0
			for _, s := range []*Store{a, b, a, b} {
				wg.Go(func() {
					_, ok, err := s.Apply(ctx, Transition{RuntimeID: id, Type: step.typ, UID: "u", Message: map[EventType]string{ContainerPaused: SuspendedMessage}[step.typ]})
					if err != nil {
						t.Error(err)
					}
					if ok {
						mu.Lock()
						applied++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if applied != 1 {
				t.Fatalf("round %d: %s applied %d times, want once", round, step.typ, applied)
			}
			got, err := a.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != step.want || got.Epoch != 1 {
				t.Fatalf("round %d: after %s the record is %s epoch %d, want %s epoch 1", round, step.typ, got.State, got.Epoch, step.want)
			}
		}
	}
	if n := countEvents(t, a.db, id, ContainerPaused); n != 3 {
		t.Errorf("%d ContainerPaused events, want 3", n)
	}
	if n := countEvents(t, a.db, id, ContainerStarted); n != 3 {
		t.Errorf("%d ContainerStarted events, want 3", n)
	}
}

// TestApply runs sequences of transitions from a fresh record (state created,
// run 1) and checks what was recorded and the record at the end.
func TestApply(t *testing.T) {
	type want struct {
		state   State
		message string
		uid     string
		epoch   int
	}
	tests := []struct {
		name        string
		kind        string
		uid         string // of the record
		ts          []Transition
		wantApplied []bool
		want        want
		wantEvents  []EventType // after Created
	}{
		{
			name:        "deployment lifecycle",
			kind:        "deployment",
			ts:          []Transition{{Type: StartRequested}, {Type: ContainerStarted, Message: "1/1 ready", UID: "u1"}, {Type: StopRequested}, {Type: ContainerExited, Message: "scaled to 0"}},
			wantApplied: []bool{true, true, true, true},
			want:        want{StateExited, "scaled to 0", "u1", 3},
			wantEvents:  []EventType{StartRequested, ContainerStarted, StopRequested, ContainerExited},
		},
		{
			name:        "started once per request",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: ContainerStarted}, {Type: ContainerStarted}, {Type: StartRequested}, {Type: ContainerStarted}, {Type: ContainerStarted}},
			wantApplied: []bool{true, false, true, true, false},
			want:        want{StateRunning, "", "u1", 2},
			wantEvents:  []EventType{ContainerStarted, StartRequested, ContainerStarted},
		},
		{
			name:        "no start after a terminal event",
			kind:        "job",
			uid:         "u1",
			ts:          []Transition{{Type: ContainerFailed, Message: "exit code 1"}, {Type: ContainerStarted}, {Type: ContainerExited}},
			wantApplied: []bool{true, false, false},
			want:        want{StateFailed, "exit code 1", "u1", 1},
			wantEvents:  []EventType{ContainerFailed},
		},
		{
			name:        "stopping a job deletes it",
			kind:        "job",
			uid:         "u1",
			ts:          []Transition{{Type: ContainerStarted}, {Type: StopRequested, Expect: ContainerDeleted}, {Type: ContainerDeleted}},
			wantApplied: []bool{true, true, true},
			want:        want{StateExited, "stopped", "u1", 2},
			wantEvents:  []EventType{ContainerStarted, StopRequested, ContainerDeleted},
		},
		{
			name:        "deletion confirmed once",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: DeleteRequested, Message: "deleting"}, {Type: ContainerDeleted, Message: "gone"}, {Type: ContainerDeleted, Message: "gone"}},
			wantApplied: []bool{true, true, false},
			want:        want{StateDeleted, "gone", "u1", 2},
			wantEvents:  []EventType{DeleteRequested, ContainerDeleted},
		},
		{
			name:        "deleted behind our back",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: ContainerStarted}, {Type: ContainerDeleted, Message: "deleted outside gobrave"}},
			wantApplied: []bool{true, true},
			want:        want{StateDeleted, "deleted outside gobrave", "u1", 1},
			wantEvents:  []EventType{ContainerStarted, ContainerDeleted},
		},
		{
			name:        "first observed UID is kept",
			kind:        "job",
			ts:          []Transition{{Type: ContainerStarted, UID: "u1"}, {Type: ContainerExited, UID: "u2"}, {Type: ContainerExited, UID: "u1"}},
			wantApplied: []bool{true, false, true},
			want:        want{StateExited, "", "u1", 1},
			wantEvents:  []EventType{ContainerStarted, ContainerExited},
		},
		{
			name:        "stale UID ignored",
			kind:        "deployment",
			uid:         "new",
			ts:          []Transition{{Type: ContainerDeleted, UID: "old"}, {Type: ContainerFailed, UID: "old"}, {Type: ContainerStarted, UID: "new"}},
			wantApplied: []bool{false, false, true},
			want:        want{StateRunning, "", "new", 1},
			wantEvents:  []EventType{ContainerStarted},
		},
		{
			name:        "requested UID replaces the record's",
			kind:        "deployment",
			uid:         "old",
			ts:          []Transition{{Type: Adopted, UID: "new", Message: "adopted"}},
			wantApplied: []bool{true},
			want:        want{StateCreated, "adopted", "new", 2},
			wantEvents:  []EventType{Adopted},
		},
		{
			name:        "resume after pause",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: ContainerStarted}, {Type: PauseRequested}, {Type: ContainerExited}, {Type: ResumeRequested}, {Type: ContainerStarted}},
			wantApplied: []bool{true, true, true, true, true},
			want:        want{StateRunning, "", "u1", 3},
			wantEvents:  []EventType{ContainerStarted, PauseRequested, ContainerExited, ResumeRequested, ContainerStarted},
		},
		{
			// Issue 12, case 1: a second stop is a request of its own.
			name:        "second stop of a stopped deployment",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: StopRequested}, {Type: ContainerExited, Message: "0"}, {Type: StopRequested}, {Type: ContainerExited, Message: "0"}},
			wantApplied: []bool{true, true, true, true},
			want:        want{StateExited, "0", "u1", 3},
			wantEvents:  []EventType{StopRequested, ContainerExited, StopRequested, ContainerExited},
		},
		{
			name:        "second stop of a stopped job",
			kind:        "job",
			uid:         "u1",
			ts:          []Transition{{Type: StopRequested, Expect: ContainerDeleted}, {Type: ContainerDeleted}, {Type: StopRequested, Expect: ContainerDeleted}, {Type: ContainerDeleted}},
			wantApplied: []bool{true, true, true, true},
			want:        want{StateExited, "stopped", "u1", 3},
			wantEvents:  []EventType{StopRequested, ContainerDeleted, StopRequested, ContainerDeleted},
		},
		{
			name:        "observation of an older request",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: StartRequested}, {Type: StopRequested}, {Type: ContainerStarted, Epoch: 2}, {Type: ContainerExited, Epoch: 3}},
			wantApplied: []bool{true, true, false, true},
			want:        want{StateExited, "", "u1", 3},
			wantEvents:  []EventType{StartRequested, StopRequested, ContainerExited},
		},
		{
			name:        "a failed request puts the state back",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: StopRequested}, {Type: ContainerExited}, {Type: StartRequested}, {Type: RequestFailed, Epoch: 3, Restore: StateExited, Message: "forbidden"}},
			wantApplied: []bool{true, true, true, true},
			want:        want{StateExited, "forbidden", "u1", 3},
			wantEvents:  []EventType{StopRequested, ContainerExited, StartRequested, RequestFailed},
		},
		{
			name:        "a failed request superseded by a later one",
			kind:        "deployment",
			uid:         "u1",
			ts:          []Transition{{Type: StartRequested, Message: "a"}, {Type: StopRequested, Message: "b"}, {Type: RequestFailed, Epoch: 2, Restore: StateCreated, Message: "forbidden"}},
			wantApplied: []bool{true, true, true},
			want:        want{StateStopping, "b", "u1", 3},
			wantEvents:  []EventType{StartRequested, StopRequested, RequestFailed},
		},
		{
			// Found by the e2e random walk: a start and a resume of a deleted
			// job raced; the start's compensation must not put the old UID back.
			name: "a superseded failure keeps the later request's object",
			kind: "job",
			uid:  "old",
			ts: []Transition{{Type: StartRequested, Retire: true}, {Type: ResumeRequested, Retire: true},
				{Type: ContainerStarted, UID: "new"}, {Type: RequestFailed, Epoch: 2, Restore: StateDeleted, UID: "old", Message: "already exists"}},
			wantApplied: []bool{true, true, true, true},
			want:        want{StateRunning, "", "new", 3},
			wantEvents:  []EventType{StartRequested, ResumeRequested, ContainerStarted, RequestFailed},
		},
		{
			// Issue 12, case 3: the old job's deletion does not end the new run.
			name: "a job replaced by a new one",
			kind: "job",
			uid:  "old",
			ts: []Transition{{Type: ContainerExited, Message: "0"}, {Type: StartRequested, Retire: true},
				{Type: ContainerDeleted, UID: "old"}, {Type: ContainerStarted, UID: "new"}, {Type: ContainerDeleted, UID: "old"}},
			wantApplied: []bool{true, true, false, true, false},
			want:        want{StateRunning, "", "new", 2},
			wantEvents:  []EventType{ContainerExited, StartRequested, ContainerStarted},
		},
	}
	for _, tt := range tests {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", tt.name, batch), func(t *testing.T) {
				ctx := context.Background()
				s, _ := openTest(t)
				w := workload("default", tt.kind, "w")
				w.UID = tt.uid
				mustPut(t, s, w)
				for i := range tt.ts {
					tt.ts[i].RuntimeID = w.RuntimeID
				}

				var applied []bool
				var last Workload
				if batch {
					as, err := s.ApplyBatch(ctx, tt.ts)
					if err != nil {
						t.Fatal(err)
					}
					for _, a := range as {
						applied = append(applied, a.Applied)
						if a.Applied != (a.Event.Seq != 0) {
							t.Errorf("Applied %v with event seq %d", a.Applied, a.Event.Seq)
						}
						last = a.Workload
					}
				} else {
					for _, tr := range tt.ts {
						ev, ok, err := s.Apply(ctx, tr)
						if err != nil {
							t.Fatal(err)
						}
						if ok != (ev.Seq != 0) || ev.Type != tr.Type {
							t.Errorf("Apply(%s) = %+v, %v", tr.Type, ev, ok)
						}
						applied = append(applied, ok)
					}
				}
				if diff := cmp.Diff(tt.wantApplied, applied); diff != "" {
					t.Errorf("applied (-want +got):\n%s", diff)
				}

				got, err := s.Get(ctx, w.RuntimeID)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, want{got.State, got.Message, got.UID, got.Epoch}, cmp.AllowUnexported(want{})); diff != "" {
					t.Errorf("record (-want +got):\n%s", diff)
				}
				if batch {
					if diff := cmp.Diff(got, last); diff != "" {
						t.Errorf("last Applied.Workload differs from Get (-get +applied):\n%s", diff)
					}
				}
				evs, err := s.Events(ctx, w.RuntimeID)
				if err != nil {
					t.Fatal(err)
				}
				var types []EventType
				for _, e := range evs[1:] {
					types = append(types, e.Type)
				}
				if diff := cmp.Diff(tt.wantEvents, types); diff != "" {
					t.Errorf("events after Created (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestApplyBatchIsAtomic(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "job", "j")
	mustPut(t, s, w)
	_, err := s.ApplyBatch(ctx, []Transition{
		{RuntimeID: w.RuntimeID, Type: StartRequested},
		{RuntimeID: "k8s-default|job|missing", Type: ContainerStarted},
	})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("ApplyBatch() = %v, want ErrNotFound", err)
	}
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Errorf("%d events after a failed batch, want only Created", len(evs))
	}
	if _, err := s.ApplyBatch(ctx, []Transition{{RuntimeID: w.RuntimeID, Type: "Exploded"}}); err == nil {
		t.Error("ApplyBatch(unknown type) succeeded")
	}
	if as, err := s.ApplyBatch(ctx, nil); err != nil || len(as) != 0 {
		t.Errorf("ApplyBatch(nil) = %v, %v", as, err)
	}
}

// TestObservedIdempotentAcrossStores has two stores on one file (two
// processes) apply the same observed events at once: each is recorded once.
func TestObservedIdempotentAcrossStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	a, _ := openAt(t, path)
	b, _ := openAt(t, path)

	const n = 50
	var ids []string
	for i := range n {
		w := workload("default", "job", fmt.Sprintf("j%02d", i))
		w.UID = fmt.Sprintf("uid-%d", i)
		mustPut(t, a, w)
		ids = append(ids, w.RuntimeID)
	}
	// The same transitions twice in each store: started, then deleted.
	var ts []Transition
	for i, id := range ids {
		uid := fmt.Sprintf("uid-%d", i)
		ts = append(ts,
			Transition{RuntimeID: id, Type: ContainerStarted, UID: uid},
			Transition{RuntimeID: id, Type: ContainerDeleted, UID: uid},
		)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	recorded := 0
	for _, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, tr := range ts {
				_, ok, err := s.Apply(ctx, tr)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					recorded++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if recorded != 2*n {
		t.Errorf("%d transitions applied, want %d", recorded, 2*n)
	}
	for _, id := range ids {
		for _, typ := range []EventType{ContainerStarted, ContainerDeleted} {
			if got := countEvents(t, a.db, id, typ); got > 1 {
				t.Errorf("%s: %d %s events, want at most 1", id, got, typ)
			}
		}
		if got := countEvents(t, a.db, id, ContainerDeleted); got != 1 {
			t.Errorf("%s: %d ContainerDeleted events, want 1", id, got)
		}
	}
}

// TestObservedUniqueIndex checks the database itself refuses a second copy of
// an observed event, whatever the state says.
func TestObservedUniqueIndex(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "deployment", "d")
	w.UID = "u"
	mustPut(t, s, w)
	for range 2 {
		if _, err := execEvent(ctx, s, w.RuntimeID, string(ContainerDeleted), "", "u", 1, true, 0, "", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := countEvents(t, s.db, w.RuntimeID, ContainerDeleted); got != 1 {
		t.Errorf("%d copies of an observed event, want 1", got)
	}
	// Requested events are never deduplicated.
	for range 2 {
		if _, err := execEvent(ctx, s, w.RuntimeID, string(StopRequested), "", "u", 1, false, 0, "", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := countEvents(t, s.db, w.RuntimeID, StopRequested); got != 2 {
		t.Errorf("%d requested events, want 2", got)
	}
}

// TestRetireNamesTheNewObject: the request that replaces an object is about
// the new one; its UID is filled in when the object is made.
func TestRetireNamesTheNewObject(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "job", "j")
	w.UID = "old"
	mustPut(t, s, w)
	as, err := s.ApplyBatch(ctx, []Transition{{RuntimeID: w.RuntimeID, Type: StartRequested, Retire: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := as[0].Event.UID; got != "" {
		t.Errorf("StartRequested about %q before the new object exists, want no UID", got)
	}
	if ok, err := s.SetObjectUID(ctx, w.RuntimeID, as[0].Workload.Epoch, "new", ""); err != nil || !ok {
		t.Fatalf("SetObjectUID = %v, %v", ok, err)
	}
	evs, err := s.Events(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if got := evs[len(evs)-1]; got.Type != StartRequested || got.UID != "new" {
		t.Errorf("last event %s about %q, want StartRequested about new", got.Type, got.UID)
	}
	// A later epoch does not take a UID meant for an earlier one.
	if ok, _ := s.SetObjectUID(ctx, w.RuntimeID, as[0].Workload.Epoch-1, "other", ""); ok {
		t.Error("SetObjectUID of an older epoch succeeded")
	}
}

// TestForgetAndRestore: an intent whose create failed is undone, unless a
// later request owns the record.
func TestForgetAndRestore(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)

	w := workload("default", "deployment", "new")
	mustPut(t, s, w)
	if err := s.Forget(ctx, w.RuntimeID, 2); !errors.Is(err, ErrSuperseded) {
		t.Errorf("Forget at another epoch = %v, want ErrSuperseded", err)
	}
	if err := s.Forget(ctx, w.RuntimeID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, w.RuntimeID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Forget = %v, want ErrNotFound", err)
	}
	if evs, _ := s.Events(ctx, w.RuntimeID); len(evs) != 0 {
		t.Errorf("%d events left after Forget", len(evs))
	}

	old := workload("default", "job", "old")
	old.UID = "u1"
	mustPut(t, s, old)
	if _, _, err := s.Apply(ctx, Transition{RuntimeID: old.RuntimeID, Type: DeleteRequested}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Get(ctx, old.RuntimeID)
	again := old
	again.UID, again.Spec.Image = "", "busybox:2"
	if err := s.Put(ctx, again, Transition{Message: "create job.batch/old"}); err != nil {
		t.Fatal(err)
	}
	intent, _ := s.Get(ctx, old.RuntimeID)
	if err := s.Restore(ctx, before, intent.Epoch, "create failed: forbidden"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, old.RuntimeID)
	want := before
	want.Epoch, want.UpdatedAt = intent.Epoch, got.UpdatedAt
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored record (-want +got):\n%s", diff)
	}
	evs, _ := s.Events(ctx, old.RuntimeID)
	if last := evs[len(evs)-1]; last.Type != RequestFailed || last.Message != "create failed: forbidden" {
		t.Errorf("last event %s %q, want RequestFailed", last.Type, last.Message)
	}
	if err := s.Restore(ctx, before, intent.Epoch-1, "x"); !errors.Is(err, ErrSuperseded) {
		t.Errorf("Restore at an older epoch = %v, want ErrSuperseded", err)
	}
}

// TestResults follows the record's structured result through a job's life:
// a pull error while starting, the reason cleared when it starts, the exit
// code and times of its failure, a new run forgetting them, and the reasons
// the store itself gives a stop and a deletion.
func TestResults(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "job", "j")
	w.UID = "u"
	mustPut(t, s, w)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	code := int32(42)
	at := func(t time.Time) *time.Time { return &t }
	steps := []struct {
		tr   Transition
		want Result
		st   State
	}{
		{Transition{Type: StartRequested}, Result{}, StateStarting},
		{Transition{Type: ContainerWaiting, Message: `Back-off pulling image "x"`, Result: Result{Reason: "ImagePullBackOff"}}, Result{Reason: "ImagePullBackOff"}, StateStarting},
		{Transition{Type: ContainerStarted, Time: t0, Result: Result{StartedAt: at(t0)}}, Result{StartedAt: at(t0)}, StateRunning},
		{Transition{Type: ContainerFailed, Time: t2, Result: Result{Reason: "BackoffLimitExceeded", ExitCode: &code, FinishedAt: at(t1)}},
			Result{Reason: "BackoffLimitExceeded", ExitCode: &code, StartedAt: at(t0), FinishedAt: at(t1)}, StateFailed},
		{Transition{Type: StartRequested, Retire: true}, Result{}, StateStarting},
		{Transition{Type: ContainerStarted, UID: "u2", Time: t1}, Result{StartedAt: at(t1)}, StateRunning},
		{Transition{Type: StopRequested, Expect: ContainerDeleted}, Result{StartedAt: at(t1)}, StateStopping},
		{Transition{Type: ContainerDeleted, UID: "u2", Time: t2}, Result{Reason: ReasonStopped, StartedAt: at(t1), FinishedAt: at(t2)}, StateExited},
		{Transition{Type: DeleteRequested, Time: t2}, Result{Reason: ReasonDeleted, StartedAt: at(t1), FinishedAt: at(t2)}, StateDeleted},
	}
	for i, step := range steps {
		step.tr.RuntimeID = w.RuntimeID
		ev, ok, err := s.Apply(ctx, step.tr)
		if err != nil || !ok {
			t.Fatalf("step %d (%s): applied %v, %v", i, step.tr.Type, ok, err)
		}
		got, err := s.Get(ctx, w.RuntimeID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != step.st {
			t.Errorf("step %d (%s): state %s, want %s", i, step.tr.Type, got.State, step.st)
		}
		if diff := cmp.Diff(step.want, got.Result); diff != "" {
			t.Errorf("step %d (%s): record result (-want +got):\n%s", i, step.tr.Type, diff)
		}
		if step.tr.Type == ContainerDeleted && ev.Reason != ReasonStopped {
			t.Errorf("the deletion that ends a stop has reason %q, want Stopped", ev.Reason)
		}
	}
	evs, err := s.Events(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	var failed Event
	for _, e := range evs {
		if e.Type == ContainerFailed {
			failed = e
		}
	}
	if failed.Reason != "BackoffLimitExceeded" || failed.ExitCode == nil || *failed.ExitCode != 42 || failed.FinishedAt == nil || !failed.FinishedAt.Equal(t1) {
		t.Errorf("recorded failure %+v, want BackoffLimitExceeded, exit code 42, finished at %s", failed, t1)
	}
}

// TestPausedResult: a suspension sets the record's reason to the event's
// (Suspended), a start out of paused clears it, a restart begins a new run.
func TestPausedResult(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "job", "task")
	mustPut(t, s, w)
	steps := []struct {
		t    Transition
		want string
	}{
		{Transition{Type: ContainerStarted, UID: "u"}, ""},
		{Transition{Type: ContainerPaused, UID: "u", Message: SuspendedMessage, Result: Result{Reason: "Suspended"}}, "Suspended"},
		{Transition{Type: ContainerStarted, UID: "u"}, ""},
		{Transition{Type: ContainerPaused, UID: "u", Message: SuspendedMessage, Result: Result{Reason: "Suspended"}}, "Suspended"},
		{Transition{Type: RestartRequested}, ""},
	}
	for i, st := range steps {
		st.t.RuntimeID = w.RuntimeID
		if _, _, err := s.Apply(ctx, st.t); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, w.RuntimeID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Reason != st.want {
			t.Errorf("step %d (%s): reason %q, want %q (state %s)", i, st.t.Type, got.Reason, st.want, got.State)
		}
	}
}

// TestApplyBatchRecordedBefore mixes, in one batch of more events than one
// insert statement takes, an observed event another process recorded first
// with events of other records and a later event of the same record: the
// first is not applied and leaves its record as it was (not even
// updated_at moves), the later one applies from there, and every recorded
// event gets its seq in the order of the batch.
func TestApplyBatchRecordedBefore(t *testing.T) {
	ctx := context.Background()
	s, c := openTest(t)
	ids := fill(t, s, 150)
	a, b := ids[1], ids[2] // running, epoch 1, uid-1 and uid-2
	if _, err := execEvent(ctx, s, a, string(ContainerExited), "by another process", "uid-1", 1, true, 0, "", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	before, err := s.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	var ts []Transition
	for _, id := range ids[3:73] { // 70 records stop
		ts = append(ts, Transition{RuntimeID: id, Type: StopRequested})
	}
	ts = append(ts,
		Transition{RuntimeID: a, Type: ContainerExited, Message: "again"}, // recorded before: not applied
		Transition{RuntimeID: b, Type: ContainerExited, Message: "0"},
		Transition{RuntimeID: b, Type: ContainerExited, Message: "0"}, // nothing new: exited
	)
	for _, id := range ids[73:] {
		ts = append(ts, Transition{RuntimeID: id, Type: StopRequested})
	}
	ts = append(ts, Transition{RuntimeID: a, Type: ContainerFailed, Message: "boom"})
	res, err := s.ApplyBatch(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(ts) {
		t.Fatalf("%d results for %d transitions", len(res), len(ts))
	}
	var last int64
	for i, r := range res {
		want := true
		switch {
		case ts[i].RuntimeID == a && ts[i].Type == ContainerExited:
			want = false
			if r.Event.Seq != 0 || r.Workload.State != StateRunning || !r.Workload.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("the event recorded before: %+v, want seq 0 and the record as it was", r)
			}
		case ts[i].RuntimeID == b && i > 0 && ts[i-1].RuntimeID == b:
			want = false
		}
		if r.Applied != want {
			t.Fatalf("transition %d (%s %s): applied %v, want %v", i, ts[i].RuntimeID, ts[i].Type, r.Applied, want)
		}
		if r.Applied {
			if r.Event.Seq <= last {
				t.Fatalf("transition %d: seq %d after %d", i, r.Event.Seq, last)
			}
			last = r.Event.Seq
		}
	}
	if r := res[len(res)-1]; r.Workload.State != StateFailed || r.Workload.Message != "boom" {
		t.Errorf("the later event of the same record: %s %q, want failed boom", r.Workload.State, r.Workload.Message)
	}
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	applied := map[int64]Transition{}
	for i, r := range res {
		if r.Applied {
			applied[r.Event.Seq] = ts[i]
		}
	}
	n := 0
	for _, e := range evs {
		if tr, ok := applied[e.Seq]; ok {
			n++
			if e.RuntimeID != tr.RuntimeID || e.Type != tr.Type {
				t.Errorf("event %d is %s %s, want %s %s", e.Seq, e.RuntimeID, e.Type, tr.RuntimeID, tr.Type)
			}
		}
	}
	if n != len(applied) || len(evs) != len(applied)+1 {
		t.Errorf("%d events (%d matched), want the %d applied and the one recorded before", len(evs), n, len(applied))
	}
	for id, want := range map[string]State{a: StateFailed, b: StateExited, ids[3]: StateStopping, ids[149]: StateStopping, ids[0]: StateExited} {
		w, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if w.State != want {
			t.Errorf("%s: %s, want %s", id, w.State, want)
		}
	}
}

// TestApplyBatchNoSpecs: the same transitions through ApplyBatchNoSpecs and
// ApplyBatch, on two stores filled alike, record the same events and
// states; only the returned specs differ (nil without).
func TestApplyBatchNoSpecs(t *testing.T) {
	ctx := context.Background()
	a, _ := openTest(t)
	b, _ := openTest(t)
	ids := fill(t, a, 20)
	if got := fill(t, b, 20); !slices.Equal(got, ids) {
		t.Fatalf("fill made %v and %v", ids, got)
	}
	var ts []Transition
	for i, id := range ids {
		ts = append(ts, Transition{RuntimeID: id, Type: StartRequested})
		if i%2 == 0 {
			ts = append(ts, Transition{RuntimeID: id, Type: ContainerStarted, UID: "u-" + id})
		} else {
			ts = append(ts, Transition{RuntimeID: id, Type: ContainerExited, Message: "out"})
		}
	}
	with, err := a.ApplyBatch(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	without, err := b.ApplyBatchNoSpecs(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	if len(with) != len(without) {
		t.Fatalf("%d results with specs, %d without", len(with), len(without))
	}
	for i := range with {
		w, o := with[i], without[i]
		if len(w.Workload.Spec.Command) == 0 {
			t.Fatalf("ApplyBatch returned %s without its spec", w.Workload.RuntimeID)
		}
		if o.Workload.Spec.Image != "" || o.Workload.Spec.Command != nil {
			t.Fatalf("ApplyBatchNoSpecs returned a spec for %s: %+v", o.Workload.RuntimeID, o.Workload.Spec)
		}
		w.Workload.Spec, o.Workload.Spec = spec.ContainerSpec{}, spec.ContainerSpec{}
		if !reflect.DeepEqual(w, o) {
			t.Fatalf("result %d differs:\nApplyBatch        %+v\nApplyBatchNoSpecs %+v", i, w, o)
		}
	}
	for _, id := range ids {
		wa, err := a.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wb, err := b.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(wa, wb) {
			t.Fatalf("records differ after the batch:\n%+v\n%+v", wa, wb)
		}
	}
}
