package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// liveOwner is this test process under the owner ID id: alive, so only
// the heartbeats decide whose a lease is.
func liveOwner(id string) Owner {
	host, _ := os.Hostname()
	return Owner{ID: id, PID: os.Getpid(), Host: host}
}

func TestLeases(t *testing.T) {
	ctx := context.Background()
	s, c := openTest(t)
	me := liveOwner("me")
	// other is alive: it is this test process under another owner ID.
	other := liveOwner("other")
	const ttl = 30 * time.Second

	got, err := s.AcquireLeases(ctx, me, []string{"a", "b", "a"}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("first acquire (-want +got):\n%s", diff)
	}

	c.add(10 * time.Second)
	got, err = s.AcquireLeases(ctx, other, []string{"a", "b", "c"}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"c"}, got); diff != "" {
		t.Errorf("conflicting acquire (-want +got):\n%s", diff)
	}

	// Acquiring again what one holds renews it.
	got, err = s.AcquireLeases(ctx, me, []string{"a", "c"}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a"}, got); diff != "" {
		t.Errorf("re-acquire (-want +got):\n%s", diff)
	}
	holder, beat, ok, err := s.LeaseHolder(ctx, "a")
	if err != nil || !ok {
		t.Fatalf("LeaseHolder(a) = %v, %v", ok, err)
	}
	if diff := cmp.Diff(me, holder); diff != "" || !beat.Equal(t0.Add(10*time.Second)) {
		t.Errorf("LeaseHolder(a) = %+v, %v; want me at t0+10s (%s)", holder, beat, diff)
	}

	// b's heartbeat is now 25s old: not stale yet. After a renewal of me's
	// leases and 31s without one from other, other's c is stale and me's
	// are not.
	c.add(15 * time.Second)
	if err := s.RenewLeases(ctx, me); err != nil {
		t.Fatal(err)
	}
	c.add(31 * time.Second)
	got, err = s.AcquireLeases(ctx, other, []string{"a", "b", "c"}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("after ttl (-want +got):\n%s", diff)
	}
	if err := s.RenewLeases(ctx, other); err != nil {
		t.Fatal(err)
	}
	got, err = s.AcquireLeases(ctx, me, []string{"a", "b", "c"}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{}, got); diff != "" {
		t.Errorf("after renew (-want +got):\n%s", diff)
	}

	// Releasing: only one's own, some or all.
	if err := s.ReleaseLeases(ctx, me, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := s.LeaseHolder(ctx, "a"); !ok {
		t.Error("another owner's lease was released")
	}
	if err := s.ReleaseLeases(ctx, other, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := s.LeaseHolder(ctx, "a"); ok {
		t.Error("lease a still held after its release")
	}
	if err := s.ReleaseLeases(ctx, other); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, _, ok, err := s.LeaseHolder(ctx, id); ok || err != nil {
			t.Errorf("LeaseHolder(%s) = %v, %v after releasing all", id, ok, err)
		}
	}

	if _, err := s.AcquireLeases(ctx, Owner{}, []string{"a"}, ttl); err == nil {
		t.Error("AcquireLeases(owner without ID) succeeded")
	}
}

func TestLeaseTakeoverFromDeadProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("dead processes are only detected on unix")
	}
	ctx := context.Background()
	s, _ := openTest(t)
	host, _ := os.Hostname()
	if host == "" {
		t.Skip("no hostname")
	}

	// A process that has exited and been reaped.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := Owner{ID: "dead", PID: cmd.Process.Pid, Host: host}
	deadElsewhere := Owner{ID: "dead-elsewhere", PID: cmd.Process.Pid, Host: host + "-other"}
	if _, err := s.AcquireLeases(ctx, dead, []string{"a"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLeases(ctx, deadElsewhere, []string{"b"}, time.Hour); err != nil {
		t.Fatal(err)
	}

	me := liveOwner("me")
	got, err := s.AcquireLeases(ctx, me, []string{"a", "b"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The pid of another host says nothing about that host's processes.
	if diff := cmp.Diff([]string{"a"}, got); diff != "" {
		t.Errorf("acquire (-want +got):\n%s", diff)
	}
}

// TestReleaseManyLeases releases more leases at once than SQLite allows
// variables in one statement (32,766): recover --once at 100,000 records did.
func TestReleaseManyLeases(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	ids := fill(t, s, 40000)
	o := Owner{ID: "many", PID: 1, Host: "h"}
	if _, err := s.AcquireLeases(ctx, o, ids, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLeases(ctx, o, ids...); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := s.LeaseHolder(ctx, ids[len(ids)-1]); err != nil || ok {
		t.Fatalf("lease still held (%v, %v)", ok, err)
	}
	evs, err := s.Events(ctx, ids...)
	if err != nil || len(evs) != 0 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
}

// TestApplyFree checks that ApplyFree records what build makes of the IDs
// no live owner holds, and leaves the leases as AcquireLeases, then
// ReleaseLeases, of the same IDs would: a live owner's stays, a stale one
// is gone; and that an unknown runtime ID records nothing.
func TestApplyFree(t *testing.T) {
	ctx := context.Background()
	s, c := openTest(t)
	me, live, stale := liveOwner("me"), liveOwner("live"), liveOwner("stale")
	const ttl = 30 * time.Second
	var ids []string
	for _, n := range []string{"a", "b", "c", "d"} {
		w := workload("ns", "job", n)
		mustPut(t, s, w)
		ids = append(ids, w.RuntimeID)
	}
	a, b, cc, d := ids[0], ids[1], ids[2], ids[3]
	if _, err := s.AcquireLeases(ctx, stale, []string{cc}, ttl); err != nil {
		t.Fatal(err)
	}
	c.add(ttl + time.Second)
	if _, err := s.AcquireLeases(ctx, live, []string{b}, ttl); err != nil {
		t.Fatal(err)
	}

	calls := 0
	none := "k8s-ns|job|none"
	notD := func(id string, h Head) bool { return id != d } // d is read, not leased
	heads, free, res, err := s.ApplyFree(ctx, me, []string{a, b, cc, a, d, none}, ttl, notD, func(heads map[string]Head, free []string) FreeBatch {
		calls++
		if heads[a].State != StateCreated || heads[a].UID != "" {
			t.Errorf("build's head of a: %+v, want created without a UID", heads[a])
		}
		var fb FreeBatch
		for _, id := range free {
			fb.Transitions = append(fb.Transitions, Transition{RuntimeID: id, Type: ContainerStarted, UID: "uid-" + id})
		}
		fb.UIDs = [][2]string{{d, "uid-d"}} // not leased here: only to check it is set
		return fb
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{a, cc}, free); diff != "" || calls != 1 {
		t.Errorf("free (-want +got):\n%s (build called %d times)", diff, calls)
	}
	// The heads are those before the batch, of every ID with a record.
	if _, ok := heads[none]; ok || len(heads) != 4 || heads[cc].State != StateCreated || heads[d].State != StateCreated {
		t.Errorf("heads = %+v, want a, b, c and d as created", heads)
	}
	if len(res) != 2 || !res[0].Applied || !res[1].Applied || res[0].Workload.State != StateRunning {
		t.Errorf("res = %+v, want a and c started", res)
	}
	for id, want := range map[string]State{a: StateRunning, b: StateCreated, cc: StateRunning} {
		w, err := s.Get(ctx, id)
		if err != nil || w.State != want {
			t.Errorf("%s: %s, %v; want %s", id, w.State, err, want)
		}
	}
	if w, err := s.Get(ctx, d); err != nil || w.UID != "uid-d" {
		t.Errorf("d's UID = %q, %v; want uid-d", w.UID, err)
	}
	// The leases: b's live owner keeps it; c's stale one is gone, and none is left to me.
	for id, want := range map[string]string{a: "", b: "live", cc: "", d: ""} {
		o, _, ok, err := s.LeaseHolder(ctx, id)
		if err != nil || ok != (want != "") || ok && o.ID != want {
			t.Errorf("lease of %s: %+v, %v, %v; want %q", id, o, ok, err, want)
		}
	}

	// An unknown runtime ID: nothing is recorded, not even the UIDs.
	all := func(string, Head) bool { return true }
	_, _, _, err = s.ApplyFree(ctx, me, []string{d, "k8s-ns|job|gone"}, ttl, all, func(_ map[string]Head, free []string) FreeBatch {
		return FreeBatch{
			UIDs:        [][2]string{{d, "uid-d2"}},
			Transitions: []Transition{{RuntimeID: d, Type: ContainerStarted}, {RuntimeID: "k8s-ns|job|gone", Type: ContainerStarted}},
		}
	})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("ApplyFree with an unknown ID: %v, want ErrNotFound", err)
	}
	if w, err := s.Get(ctx, d); err != nil || w.UID != "uid-d" || w.State != StateCreated {
		t.Errorf("d after a failed ApplyFree: %s %q, %v; want created, uid-d", w.State, w.UID, err)
	}
}

// TestApplyFreeCancelled: a pass cancelled inside its write transaction
// (here while the batch is built, after the records and leases were read)
// records nothing and reports the cancellation. The applier's statements
// run under a context without an end (applier.run), so the cancellation
// must be caught around them: this fails if ApplyFree ever commits a
// batch it was cancelled in.
func TestApplyFreeCancelled(t *testing.T) {
	s, _ := openTest(t)
	w := workload("ns", "job", "a")
	mustPut(t, s, w)
	rec, err := s.Get(context.Background(), w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.Events(context.Background(), w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	all := func(string, Head) bool { return true }
	_, _, _, err = s.ApplyFree(ctx, liveOwner("me"), []string{w.RuntimeID}, time.Minute, all, func(heads map[string]Head, free []string) FreeBatch {
		cancel()
		return FreeBatch{Transitions: []Transition{{RuntimeID: w.RuntimeID, Type: ContainerStarted, UID: heads[w.RuntimeID].UID}}}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ApplyFree cancelled in its transaction: %v, want context.Canceled", err)
	}
	got, err := s.Get(context.Background(), w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != rec.State || got.Epoch != rec.Epoch {
		t.Errorf("state %s epoch %d after a cancelled pass, want %s %d", got.State, got.Epoch, rec.State, rec.Epoch)
	}
	after, err := s.Events(context.Background(), w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("%d events after a cancelled pass, want %d", len(after), len(before))
	}
}
