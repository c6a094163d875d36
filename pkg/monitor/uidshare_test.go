package monitor

import (
	"strings"
	"testing"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestRecordUIDSharesTheCachedOne: an object cached before its record is
// read (monitor --all lists faster than it registers) keeps one UID
// string: the subscription takes the cache's, not the record's copy.
func TestRecordUIDSharesTheCachedOne(t *testing.T) {
	st := newStore(t)
	m, ws := hostedStore(t, "ns")
	m.st = st
	id := jobID("ns", "task")
	uid := "0d5c6a3e-2f0b-4c59-9f7e-6b1f1f1c9d20"
	record(t, st, id, uid, store.StateRunning)
	m.Add(id)
	if err := ws.Add(job("ns", "task", strings.Clone(uid), batchv1.JobStatus{Active: 1})); err != nil {
		t.Fatal(err)
	}
	live, err := m.liveRecords(t.Context(), []string{id.String()})
	if err != nil || len(live) != 1 {
		t.Fatalf("liveRecords: %v, %v; want the ID", live, err)
	}
	sub := m.subs.get(id.String())
	if sub.uid != uid || unsafe.StringData(sub.uid) != unsafe.StringData(sub.e.uid) {
		t.Errorf("subscription UID %q (the cache's string: %v), want %q shared with the cache", sub.uid, unsafe.StringData(sub.uid) == unsafe.StringData(sub.e.uid), uid)
	}
}
