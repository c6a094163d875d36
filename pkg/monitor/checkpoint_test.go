package monitor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestWriterCheckpointsInBackground checks that what the writer records is
// checkpointed beside it (checkpointLoop), not left to SQLite's automatic
// checkpoint inside one of the writer's commits.
func TestWriterCheckpointsInBackground(t *testing.T) {
	old := checkpointEvery.Load()
	checkpointEvery.Store(int64(time.Millisecond))
	t.Cleanup(func() { checkpointEvery.Store(old); afterCheckpoint.Store(nil) })
	var copied atomic.Int64
	fn := func(r store.CheckpointResult, err error) {
		if err == nil && !r.Busy && r.Log > 0 && r.Checkpointed == r.Log {
			copied.Add(1)
		}
	}
	afterCheckpoint.Store(&fn)

	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateStarting)
	client := fake.NewClientset(job("ns", "task", "u1", batchv1.JobStatus{}))
	isWatched := watched(client)
	m := New(client, st, Options{Owner: owner("a"), Follow: true})
	m.Add(id)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := start(ctx, m)
	eventually(t, "the job watch", func() bool { return isWatched("jobs") })
	updateJobStatus(t, client, "ns", "task", batchv1.JobStatus{Active: 1, StartTime: &metav1.Time{Time: time.Now()}})
	eventually(t, "running", func() bool { return state(t, st, id) == store.StateRunning })
	eventually(t, "a checkpoint of the WAL after the writer's commit", func() bool { return copied.Load() > 0 })
	cancel()
	if r := await(t, done); r.err != nil {
		t.Fatal(r.err)
	}
}
