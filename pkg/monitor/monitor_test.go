package monitor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// --- fixtures ---------------------------------------------------------------

func newStore(t testing.TB) *store.Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "state.db"))
}

// openStore opens the database at path; two handles on one path are two
// processes sharing it.
func openStore(t testing.TB, path string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func owner(name string) store.Owner { return store.Owner{ID: name, Host: "test"} }

func jobID(ns, name string) runtimeid.ID {
	return runtimeid.ID{Runtime: runtimeid.RuntimeK8s, Namespace: ns, Kind: runtimeid.KindJob, Name: name}
}

func deployID(ns, name string) runtimeid.ID {
	return runtimeid.ID{Runtime: runtimeid.RuntimeK8s, Namespace: ns, Kind: runtimeid.KindDeployment, Name: name}
}

// record puts a workload in the store in the given state.
func record(t testing.TB, st *store.Store, id runtimeid.ID, uid string, state store.State) {
	t.Helper()
	w := store.Workload{RuntimeID: id.String(), Runtime: id.Runtime, Namespace: id.Namespace, Kind: id.Kind, Name: id.Name, UID: uid, State: state}
	if err := st.Put(t.Context(), w, store.Transition{Type: store.Created}); err != nil {
		t.Fatal(err)
	}
}

func job(ns, name, uid string, status batchv1.JobStatus) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid),
			Labels: map[string]string{WorkloadLabel: name, "app": name}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: name, Image: "busybox"}}}}},
		Status: status,
	}
}

func deployment(ns, name, uid string, replicas int32, status appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid),
			Labels: map[string]string{WorkloadLabel: name, "app": name}},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: status,
	}
}

var complete = batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}

// watched installs a watch reactor that reports, per resource, whether a
// watch is established, so that tests change objects only once the
// informer can see the change (the fake does not replay missed events).
func watched(c *fake.Clientset) func(resource string) bool {
	var mu sync.Mutex
	seen := map[string]int{}
	c.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := c.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		mu.Lock()
		seen[action.GetResource().Resource]++
		mu.Unlock()
		return true, w, nil
	})
	return func(resource string) bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[resource] > 0
	}
}

type result struct {
	sum Summary
	err error
}

// start runs m in the background; the returned channel yields Run's result.
func start(ctx context.Context, m *Monitor) <-chan result {
	ch := make(chan result, 1)
	go func() {
		s, err := m.Run(ctx)
		ch <- result{s, err}
	}()
	return ch
}

func await(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	return result{}
}

// eventually polls cond with a deadline.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func state(t *testing.T, st *store.Store, id runtimeid.ID) store.State {
	t.Helper()
	w, err := st.Get(t.Context(), id.String())
	if err != nil {
		t.Fatal(err)
	}
	return w.State
}

// history lists the events of id as "Type message uid".
func history(t *testing.T, st *store.Store, id runtimeid.ID) []string {
	t.Helper()
	evs, err := st.Events(t.Context(), id.String())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s", e.Type, e.Message, e.UID)))
	}
	return out
}

// collector is an OnEvent that keeps what it is given.
type collector struct {
	mu  sync.Mutex
	evs []store.Event
}

func (c *collector) on(e store.Event) {
	c.mu.Lock()
	c.evs = append(c.evs, e)
	c.mu.Unlock()
}

func (c *collector) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, e := range c.evs {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s", e.RuntimeID, e.Type, e.Message)))
	}
	return out
}

// count counts actions by "verb resource".
func count(c *fake.Clientset) map[string]int {
	n := map[string]int{}
	for _, a := range c.Actions() {
		n[a.GetVerb()+" "+a.GetResource().Resource]++
	}
	return n
}

func updateJobStatus(t *testing.T, c *fake.Clientset, ns, name string, status batchv1.JobStatus) {
	t.Helper()
	j, err := c.BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status = status
	if _, err := c.BatchV1().Jobs(ns).UpdateStatus(t.Context(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// --- the monitor on the fake cluster -------------------------------------------

func TestJobActiveThenComplete(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateStarting)
	client := fake.NewClientset(job("ns", "task", "u1", batchv1.JobStatus{}))
	isWatched := watched(client)
	var got collector
	m := New(client, st, Options{Owner: owner("a"), OnEvent: got.on})
	if n := m.Add(id); n != 1 {
		t.Fatalf("Add = %d, want 1", n)
	}
	done := start(t.Context(), m)
	eventually(t, "the job watch", func() bool { return isWatched("jobs") })

	updateJobStatus(t, client, "ns", "task", batchv1.JobStatus{Active: 1, StartTime: &metav1.Time{Time: time.Now()}})
	eventually(t, "running", func() bool { return state(t, st, id) == store.StateRunning })
	updateJobStatus(t, client, "ns", "task", complete)

	r := await(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if diff := cmp.Diff(Summary{Reattached: 1, Changed: 1, Terminal: 1}, r.sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if s := state(t, st, id); s != store.StateExited {
		t.Errorf("state = %s, want exited", s)
	}
	want := []string{"Created  u1", "ContainerStarted  u1", "ContainerExited 0 u1"}
	if diff := cmp.Diff(want, history(t, st, id)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	wantSeen := []string{id.String() + " ContainerStarted", id.String() + " ContainerExited 0"}
	if diff := cmp.Diff(wantSeen, got.list()); diff != "" {
		t.Errorf("OnEvent (-want +got):\n%s", diff)
	}
	if n := m.Add(id); n != 1 {
		t.Errorf("Add after the ID went terminal = %d, want 1 (it is unmarked)", n)
	}
}

func TestDeploymentReadyThenScaledToZero(t *testing.T) {
	st := newStore(t)
	id := deployID("web-ns", "web")
	record(t, st, id, "d1", store.StateStarting)
	client := fake.NewClientset(deployment("web-ns", "web", "d1", 1, appsv1.DeploymentStatus{Replicas: 1}))
	isWatched := watched(client)
	m := New(client, st, Options{Owner: owner("a")})
	m.Add(id)
	done := start(t.Context(), m)
	eventually(t, "the deployment watch", func() bool { return isWatched("deployments") })

	d, err := client.AppsV1().Deployments("web-ns").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := client.AppsV1().Deployments("web-ns").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "running", func() bool { return state(t, st, id) == store.StateRunning })

	// stop: scale to 0, then the controller reports no replicas
	if _, _, err := st.Apply(t.Context(), store.Transition{RuntimeID: id.String(), Type: store.StopRequested}); err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To[int32](0)
	if d, err = client.AppsV1().Deployments("web-ns").Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{}
	if _, err := client.AppsV1().Deployments("web-ns").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := await(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []string{"Created  d1", "ContainerStarted  d1", "StopRequested  d1", "ContainerExited 0 d1"}
	if diff := cmp.Diff(want, history(t, st, id)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if s := state(t, st, id); s != store.StateExited {
		t.Errorf("state = %s, want exited", s)
	}
}

func TestDeleteMonitoredObject(t *testing.T) {
	tests := []struct {
		name      string
		state     store.State
		wantState store.State
		wantLast  string
	}{
		{name: "running job deleted", state: store.StateRunning, wantState: store.StateDeleted, wantLast: "ContainerDeleted  u1"},
		{name: "stopping job deleted by stop", state: store.StateStopping, wantState: store.StateExited, wantLast: "ContainerDeleted stopped u1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			id := jobID("ns", "task")
			record(t, st, id, "u1", store.StateRunning)
			if tt.state == store.StateStopping {
				// What the lifecycle engine records for a job's stop.
				if _, _, err := st.Apply(t.Context(), store.Transition{RuntimeID: id.String(), Type: store.StopRequested, Expect: store.ContainerDeleted}); err != nil {
					t.Fatal(err)
				}
			}
			client := fake.NewClientset(job("ns", "task", "u1", batchv1.JobStatus{Active: 1}))
			isWatched := watched(client)
			m := New(client, st, Options{Owner: owner("a")})
			m.Add(id)
			done := start(t.Context(), m)
			eventually(t, "the job watch", func() bool { return isWatched("jobs") })
			eventually(t, "the snapshot", func() bool { return snapshotted(m, id) })
			if err := client.BatchV1().Jobs("ns").Delete(t.Context(), "task", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			r := await(t, done)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if s := state(t, st, id); s != tt.wantState {
				t.Errorf("state = %s, want %s", s, tt.wantState)
			}
			h := history(t, st, id)
			if last := h[len(h)-1]; last != tt.wantLast {
				t.Errorf("last event = %q, want %q (history %q)", last, tt.wantLast, h)
			}
			if n := count(client)["get jobs"]; n != 0 {
				t.Errorf("%d GETs of jobs, want 0", n)
			}
		})
	}
}

func TestMissingFromCache(t *testing.T) {
	t.Run("deleted before Run: one list of the namespace confirms them all", func(t *testing.T) {
		st := newStore(t)
		id := jobID("ns", "gone")
		record(t, st, id, "u1", store.StateRunning)
		var more []runtimeid.ID
		for i := range 500 {
			more = append(more, jobID("ns", fmt.Sprintf("gone-%d", i)))
			record(t, st, more[i], fmt.Sprintf("g%d", i), store.StateRunning)
		}
		client := fake.NewClientset()
		m := New(client, st, Options{Owner: owner("a")})
		m.Add(id)
		m.Add(more...)
		r := await(t, start(t.Context(), m))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if s := state(t, st, id); s != store.StateDeleted {
			t.Errorf("state = %s, want deleted", s)
		}
		if diff := cmp.Diff([]string{"Created  u1", "ContainerDeleted  u1"}, history(t, st, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		for _, id := range more {
			if s := state(t, st, id); s != store.StateDeleted {
				t.Errorf("%s: state = %s, want deleted", id, s)
			}
		}
		// The informer's list and one confirming list, for 501 IDs: enough
		// that the control loop wakes while the snapshot pass still queues
		// misses (a list taken then left the rest to a second one).
		if n := count(client); n["list jobs"] != 2 || n["get jobs"] != 0 {
			t.Errorf("%d lists and %d GETs of jobs, want 2 lists (the informer's, one confirming) and no GET", n["list jobs"], n["get jobs"])
		}
	})
	t.Run("label removed: the list finds it, heartbeats follow it", func(t *testing.T) {
		st := newStore(t)
		id := jobID("ns", "unlabelled")
		record(t, st, id, "", store.StateStarting)
		j := job("ns", "unlabelled", "u7", batchv1.JobStatus{Active: 1})
		j.Labels = nil
		client := fake.NewClientset(j)
		m := New(client, st, Options{Owner: owner("a"), LeaseTTL: 150 * time.Millisecond})
		m.Add(id)
		done := start(t.Context(), m)
		eventually(t, "running", func() bool { return state(t, st, id) == store.StateRunning })
		w, err := st.Get(t.Context(), id.String())
		if err != nil {
			t.Fatal(err)
		}
		if w.UID != "u7" {
			t.Errorf("workload UID %q, want u7", w.UID)
		}
		// The heartbeat lists it again only because it is counted outside
		// (without the count it would scan every subscription each time).
		eventually(t, "counted outside", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.nOutside == 1 })
		updateJobStatus(t, client, "ns", "unlabelled", complete)
		r := await(t, done)
		if r.err != nil {
			t.Fatal(r.err)
		}
		m.mu.Lock()
		if m.nOutside != 0 {
			t.Errorf("%d subscriptions counted outside after the ID finished, want 0", m.nOutside)
		}
		m.mu.Unlock()
		if diff := cmp.Diff([]string{"Created", "ContainerStarted  u7", "ContainerExited 0 u7"}, history(t, st, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})
}

func TestTransientListErrors(t *testing.T) {
	t.Run("retried until NotFound", func(t *testing.T) {
		st := newStore(t)
		id := jobID("ns", "gone")
		record(t, st, id, "u1", store.StateRunning)
		client := fake.NewClientset()
		calls := 0
		client.PrependReactor("list", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if !a.(k8stesting.ListAction).GetListRestrictions().Labels.Empty() {
				return false, nil, nil // the informer's
			}
			calls++ // one list at a time
			switch calls {
			case 1:
				return true, nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
			case 2:
				return true, nil, apierrors.NewTooManyRequests("slow down", 0)
			}
			return false, nil, nil
		})
		m := New(client, st, Options{Owner: owner("a")})
		m.getBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
		m.Add(id)
		r := await(t, start(t.Context(), m))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if diff := cmp.Diff([]string{"Created  u1", "ContainerDeleted  u1"}, history(t, st, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if calls != 3 {
			t.Errorf("%d confirming lists of jobs, want 3", calls)
		}
	})
	t.Run("still failing: nothing recorded", func(t *testing.T) {
		st := newStore(t)
		id := jobID("ns", "unknown")
		record(t, st, id, "u1", store.StateRunning)
		client := fake.NewClientset()
		calls := 0
		client.PrependReactor("list", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if !a.(k8stesting.ListAction).GetListRestrictions().Labels.Empty() {
				return false, nil, nil // the informer's
			}
			calls++
			return true, nil, apierrors.NewServiceUnavailable("apiserver is restarting")
		})
		m := New(client, st, Options{Owner: owner("a"), Once: true})
		m.getBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
		m.Add(id)
		r := await(t, start(t.Context(), m))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if diff := cmp.Diff(Summary{Reattached: 1}, r.sum); diff != "" {
			t.Errorf("summary (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"Created  u1"}, history(t, st, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if calls != 3 {
			t.Errorf("%d confirming lists of jobs, want 3", calls)
		}
	})
}

func TestRecreatedWithNewUID(t *testing.T) {
	t.Run("found at the snapshot", func(t *testing.T) {
		st := newStore(t)
		id := jobID("ns", "task")
		record(t, st, id, "old", store.StateRunning)
		client := fake.NewClientset(job("ns", "task", "new", batchv1.JobStatus{Active: 1}))
		m := New(client, st, Options{Owner: owner("a")})
		m.Add(id)
		r := await(t, start(t.Context(), m))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if diff := cmp.Diff([]string{"Created  old", "ContainerDeleted  old"}, history(t, st, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if s := state(t, st, id); s != store.StateDeleted {
			t.Errorf("state = %s, want deleted", s)
		}
	})
	t.Run("deleted and created again while watched", func(t *testing.T) {
		st := newStore(t)
		id := deployID("ns", "web")
		record(t, st, id, "old", store.StateStarting)
		client := fake.NewClientset(deployment("ns", "web", "old", 1, appsv1.DeploymentStatus{}))
		isWatched := watched(client)
		m := New(client, st, Options{Owner: owner("a")})
		m.Add(id)
		done := start(t.Context(), m)
		eventually(t, "the deployment watch", func() bool { return isWatched("deployments") })
		if err := client.AppsV1().Deployments("ns").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ready := appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}
		if _, err := client.AppsV1().Deployments("ns").Create(t.Context(), deployment("ns", "web", "new", 1, ready), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := await(t, done)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if diff := cmp.Diff([]string{"Created  old", "ContainerDeleted  old"}, history(t, st, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})
}

// TestHandlers drives the informer handlers directly: tombstones, objects of
// another UID, repeats and unknown objects.
func TestHandlers(t *testing.T) {
	id := jobID("ns", "task")
	newMonitor := func(uid string) *Monitor {
		m := New(fake.NewClientset(), nil, Options{Owner: owner("a")})
		m.runtimes = []string{id.Runtime}
		sub := &subscription{id: id.String(), uid: uid}
		sub.set(flagWatched, true)
		m.subs.put(sub)
		return m
	}
	queued := func(m *Monitor) []string {
		m.qmu.Lock()
		defer m.qmu.Unlock()
		var out []string
		for _, it := range m.queue {
			s := strings.TrimSpace(fmt.Sprintf("%s %s %s", it.obs.Type, it.obs.Message, it.obs.UID))
			if it.setUID != "" {
				s = "uid " + it.setUID
			}
			out = append(out, s)
		}
		return out
	}
	active := job("ns", "task", "u1", batchv1.JobStatus{Active: 1})
	tests := []struct {
		name  string
		uid   string // of the subscription
		calls func(m *Monitor)
		want  []string
	}{
		{name: "add maps the object", uid: "u1", calls: func(m *Monitor) { m.onObject("job", active, false) },
			want: []string{"ContainerStarted  u1"}},
		{name: "repeats are dropped", uid: "u1", calls: func(m *Monitor) {
			m.onObject("job", active, false)
			m.onObject("job", active, false)
		}, want: []string{"ContainerStarted  u1"}},
		{name: "first UID is learnt with the event", uid: "", calls: func(m *Monitor) { m.onObject("job", active, false) },
			want: []string{"ContainerStarted  u1"}},
		{name: "first UID without an event", uid: "", calls: func(m *Monitor) {
			m.onObject("job", job("ns", "task", "u1", batchv1.JobStatus{}), false)
		}, want: []string{"uid u1"}},
		{name: "delete", uid: "u1", calls: func(m *Monitor) { m.onObject("job", active, true) },
			want: []string{"ContainerDeleted  u1"}},
		{name: "tombstone", uid: "u1", calls: func(m *Monitor) {
			m.onObject("job", cache.DeletedFinalStateUnknown{Key: "ns/task", Obj: active}, false)
		}, want: []string{"ContainerDeleted  u1"}},
		{name: "delete of another incarnation is ignored", uid: "u2", calls: func(m *Monitor) { m.onObject("job", active, true) },
			want: nil},
		{name: "another UID: the old object is gone", uid: "u0", calls: func(m *Monitor) { m.onObject("job", active, false) },
			want: []string{"ContainerDeleted  u0", "ContainerStarted  u1"}},
		{name: "other name", uid: "u1", calls: func(m *Monitor) { m.onObject("job", job("ns", "other", "u5", complete), false) },
			want: nil},
		{name: "same name, other kind", uid: "u1", calls: func(m *Monitor) {
			m.onObject("deployment", deployment("ns", "task", "u1", 0, appsv1.DeploymentStatus{}), false)
		}, want: nil},
		{name: "not an object", uid: "u1", calls: func(m *Monitor) { m.onObject("job", "garbage", false) }, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMonitor(tt.uid)
			tt.calls(m)
			if diff := cmp.Diff(tt.want, queued(m)); diff != "" {
				t.Errorf("queued (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddIsIdempotent(t *testing.T) {
	m := New(fake.NewClientset(), nil, Options{Owner: owner("a")})
	a, b := jobID("ns", "a"), deployID("ns", "a")
	if n := m.Add(a, a, b); n != 2 {
		t.Errorf("Add(a, a, b) = %d, want 2", n)
	}
	if n := m.Add(a, b); n != 0 {
		t.Errorf("Add again = %d, want 0", n)
	}
	if n := len(m.pending); n != 2 {
		t.Errorf("%d pending, want 2", n)
	}
}

func TestAddDuringRunInANewNamespace(t *testing.T) {
	st := newStore(t)
	first, second := jobID("one", "a"), jobID("two", "b")
	record(t, st, first, "u1", store.StateRunning)
	record(t, st, second, "u2", store.StateRunning)
	client := fake.NewClientset(job("one", "a", "u1", batchv1.JobStatus{Active: 1}), job("two", "b", "u2", complete))
	isWatched := watched(client)
	m := New(client, st, Options{Owner: owner("a")})
	m.Add(first)
	done := start(t.Context(), m)
	eventually(t, "the job watch", func() bool { return isWatched("jobs") })
	if n := m.Add(second, first); n != 1 {
		t.Errorf("Add = %d, want 1", n)
	}
	eventually(t, "the second job exited", func() bool { return state(t, st, second) == store.StateExited })
	updateJobStatus(t, client, "one", "a", complete)
	r := await(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if diff := cmp.Diff(Summary{Reattached: 2, Changed: 2, Terminal: 2}, r.sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	nss := map[string]bool{}
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" {
			nss[a.GetNamespace()] = true
		}
	}
	if diff := cmp.Diff(map[string]bool{"one": true, "two": true}, nss); diff != "" {
		t.Errorf("namespaces listed (-want +got):\n%s", diff)
	}
}

func TestOnce(t *testing.T) {
	st := newStore(t)
	done, running, gone, old := jobID("ns", "done"), jobID("ns", "running"), deployID("ns", "gone"), jobID("ns", "old")
	record(t, st, done, "u1", store.StateStarting)
	record(t, st, running, "u2", store.StateStarting)
	record(t, st, gone, "u3", store.StateRunning)
	record(t, st, old, "u4", store.StateExited)
	client := fake.NewClientset(
		job("ns", "done", "u1", complete),
		job("ns", "running", "u2", batchv1.JobStatus{Active: 1}),
	)
	m := New(client, st, Options{Owner: owner("a"), Once: true})
	m.Add(done, running, gone, old, jobID("ns", "never-recorded"))
	r := await(t, start(t.Context(), m))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if diff := cmp.Diff(Summary{Reattached: 3, Changed: 3, Terminal: 3}, r.sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	want := map[runtimeid.ID]store.State{done: store.StateExited, running: store.StateRunning, gone: store.StateDeleted, old: store.StateExited}
	for id, s := range want {
		if got := state(t, st, id); got != s {
			t.Errorf("%s: state %s, want %s", id, got, s)
		}
	}
	// Released: another process can lease them now.
	got, err := st.AcquireLeases(t.Context(), owner("b"), []string{running.String()}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Errorf("leases left behind: owner b got %q", got)
	}
}

// TestConstantAPIRequests: reattaching many IDs costs one list and one watch
// per kind and namespace (or cluster-wide), never a GET per ID.
func TestConstantAPIRequests(t *testing.T) {
	tests := []struct {
		name       string
		namespaces int
		wantNS     string // the namespace of the list and watch
	}{
		{name: "one namespace", namespaces: 1, wantNS: "ns-0"},
		{name: "many namespaces: cluster-wide", namespaces: 20, wantNS: ""},
	}
	const n = 200
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			var objs []runtime.Object
			var ids []runtimeid.ID
			for i := range n {
				ns := fmt.Sprintf("ns-%d", i%tt.namespaces)
				name := fmt.Sprintf("task-%03d", i)
				uid := fmt.Sprintf("u%d", i)
				id := jobID(ns, name)
				ids = append(ids, id)
				record(t, st, id, uid, store.StateRunning)
				objs = append(objs, job(ns, name, uid, complete))
			}
			client := fake.NewClientset(objs...)
			var got collector
			m := New(client, st, Options{Owner: owner("a"), OnEvent: got.on})
			m.Add(ids...)
			r := await(t, start(t.Context(), m))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if diff := cmp.Diff(Summary{Reattached: n, Changed: n, Terminal: n}, r.sum); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			// The pods' informer too: one list and one watch, whatever n.
			if diff := cmp.Diff(map[string]int{"list jobs": 1, "watch jobs": 1, "list pods": 1, "watch pods": 1}, count(client)); diff != "" {
				t.Errorf("API requests (-want +got):\n%s", diff)
			}
			for _, a := range client.Actions() {
				if a.GetNamespace() != tt.wantNS {
					t.Errorf("%s %s in namespace %q, want %q", a.GetVerb(), a.GetResource().Resource, a.GetNamespace(), tt.wantNS)
				}
			}
			if len(got.list()) != n {
				t.Errorf("OnEvent called %d times, want %d", len(got.list()), n)
			}
		})
	}
}

func TestCacheHoldsObservations(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateRunning)
	j := job("ns", "task", "u1", batchv1.JobStatus{Active: 1})
	j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	j.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)}
	client := fake.NewClientset(j)
	m := New(client, st, Options{Owner: owner("a"), Once: true})
	m.Add(id)
	r := await(t, start(t.Context(), m))
	if r.err != nil {
		t.Fatal(r.err)
	}
	inf := m.informers["ns|job"]
	if inf == nil {
		t.Fatal("no job informer for namespace ns")
	}
	if n := inf.ws.len(); n != 1 {
		t.Fatalf("%d cached objects, want 1", n)
	}
	// What the mapping needs, not the object: its UID and observation,
	// kept in the subscription (no entry or key of the cache's own).
	m.mu.Lock()
	sub, own := m.subs.get(id.String()), len(inf.ws.items)
	m.mu.Unlock()
	if own != 0 || sub == nil || !sub.e.hosted || sub.e.uid != "u1" {
		t.Errorf("cache: %d entries of its own, subscription %+v; want none, the entry (UID u1) in the subscription", own, sub)
	}
	got, ok := inf.ws.get("ns", "task")
	if !ok {
		t.Fatal("get ns/task: not held")
	}
	cached, ok := got.(*compacted)
	if !ok {
		t.Fatalf("cached %T, want the compacted observation", got)
	}
	if got := [3]string{cached.name, cached.namespace, cached.uid}; got != [3]string{"task", "ns", "u1"} {
		t.Errorf("cached identity %q, want task, ns, u1", got)
	}
	o, ok := observe(cached)
	if diff := cmp.Diff(Observation{Type: store.ContainerStarted, UID: "u1"}, o); !ok || diff != "" {
		t.Errorf("cached observation (ok %v; -want +got):\n%s", ok, diff)
	}
}

func TestInformerCannotSync(t *testing.T) {
	t.Run("forbidden fails fast", func(t *testing.T) {
		st := newStore(t)
		id := jobID("secret", "task")
		record(t, st, id, "u1", store.StateRunning)
		client := fake.NewClientset()
		var lists atomic.Int32
		client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
			lists.Add(1)
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "",
				errors.New(`User "dev" cannot list resource "jobs" in API group "batch" in the namespace "secret"`))
		})
		// A sync timeout the test would never see end: only failing at the first refusal
		// returns (await gives up after 20 s).
		m := New(client, st, Options{Owner: owner("a"), SyncTimeout: time.Hour})
		r := await(t, start(t.Context(), m.with(id)))
		if r.err == nil {
			t.Fatal("Run succeeded, want a forbidden error")
		}
		for _, want := range []string{"forbidden", `namespace "secret"`, "kubectl auth can-i list jobs -n secret"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("error %q does not contain %q", r.err, want)
			}
		}
		if !apierrors.IsForbidden(r.err) {
			t.Errorf("error %v does not wrap the Forbidden status", r.err)
		}
		// Failing fast means at the first refusal, not after the reflector's retries.
		if n := lists.Load(); n != 1 {
			t.Errorf("%d lists of jobs, want 1: the monitor retried a forbidden list", n)
		}
		if diff := cmp.Diff([]string{"Created  u1"}, history(t, st, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		st := newStore(t)
		id := deployID("slow", "web")
		record(t, st, id, "u1", store.StateRunning)
		client := fake.NewClientset()
		client.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is down"))
		})
		m := New(client, st, Options{Owner: owner("a"), SyncTimeout: time.Second})
		r := await(t, start(t.Context(), m.with(id)))
		// The reflector's first list fails at once, so its error is known by then.
		for _, want := range []string{
			`timed out after 1s waiting for the deployment informer in namespace "slow" to sync (last error: `,
			`etcd is down)`,
			`'kubectl auth can-i list deployments -n slow'`,
		} {
			if r.err == nil || !strings.Contains(r.err.Error(), want) {
				t.Errorf("error %v, want it to contain %q", r.err, want)
			}
		}
		// Its lease is released.
		got, err := st.AcquireLeases(t.Context(), owner("b"), []string{id.String()}, time.Minute)
		if err != nil || len(got) != 1 {
			t.Errorf("lease not released: %q %v", got, err)
		}
	})
	t.Run("a hanging list is probed for the cause", func(t *testing.T) {
		st := newStore(t)
		id := jobID("hang", "task")
		record(t, st, id, "u1", store.StateRunning)
		client := fake.NewClientset()
		var probes atomic.Int32
		client.PrependReactor("list", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.ListActionImpl).GetListOptions().Limit == 1 {
				probes.Add(1)
				return true, nil, apierrors.NewServiceUnavailable("etcd is down")
			}
			// The informer's own list hangs without an error, as a watch-list
			// retried inside the reflector does, until a request timeout well
			// after the sync timeout (the fake cannot see the reflector stop,
			// and Run waits for it).
			time.Sleep(6 * time.Second)
			return true, nil, apierrors.NewTimeoutError("request timeout", 0)
		})
		m := New(client, st, Options{Owner: owner("a"), SyncTimeout: 2 * time.Second})
		r := await(t, start(t.Context(), m.with(id)))
		want := `timed out after 2s waiting for the job informer in namespace "hang" to sync (last error: etcd is down)`
		if r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", r.err, want)
		}
		if n := probes.Load(); n != 1 {
			t.Errorf("%d probes, want 1", n)
		}
	})
}

// TestClusterWideForbidden: with roles bound per namespace, the list of a
// cluster-wide informer (IDs in more than ClusterWide namespaces) is
// refused; the monitor falls back to one informer per namespace for that
// kind and records what they see. A namespace refused as well fails the run
// with the error naming it.
func TestClusterWideForbidden(t *testing.T) {
	const namespaces = 12 // more than DefaultClusterWide
	tests := []struct {
		name    string
		denied  map[string][]string // resource -> namespaces whose list is refused
		wantErr []string
		// the namespaces each resource is listed in (once each), "" being all
		wantLists map[string][]string
	}{
		{
			name:      "both kinds refused cluster-wide",
			denied:    map[string][]string{"jobs": {""}, "deployments": {""}},
			wantLists: map[string][]string{"jobs": nsList(namespaces), "deployments": nsList(namespaces), "pods": nil, "replicasets": nil},
		},
		{
			name:      "only deployments refused cluster-wide",
			denied:    map[string][]string{"deployments": {""}},
			wantLists: map[string][]string{"jobs": nil, "deployments": nsList(namespaces), "pods": nil, "replicasets": nil},
		},
		{
			name:    "a namespace refused too",
			denied:  map[string][]string{"jobs": {"", "ns-05"}, "deployments": {""}},
			wantErr: []string{"forbidden", `namespace "ns-05"`, "kubectl auth can-i list jobs -n ns-05"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			var objs []runtime.Object
			var ids []runtimeid.ID
			for i := range namespaces {
				ns := fmt.Sprintf("ns-%02d", i)
				task, web := jobID(ns, "task"), deployID(ns, "web")
				record(t, st, task, "j"+ns, store.StateRunning)
				record(t, st, web, "d"+ns, store.StateStopping)
				ids = append(ids, task, web)
				objs = append(objs, job(ns, "task", "j"+ns, complete), deployment(ns, "web", "d"+ns, 0, appsv1.DeploymentStatus{}))
			}
			client := fake.NewClientset(objs...)
			client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				res := a.GetResource()
				if !slices.Contains(tt.denied[res.Resource], a.GetNamespace()) {
					return false, nil, nil
				}
				where := "at the cluster scope"
				if a.GetNamespace() != "" {
					where = fmt.Sprintf("in the namespace %q", a.GetNamespace())
				}
				return true, nil, apierrors.NewForbidden(res.GroupResource(), "",
					fmt.Errorf(`User "dev" cannot list resource %q in API group %q %s`, res.Resource, res.Group, where))
			})
			m := New(client, st, Options{Owner: owner("a"), SyncTimeout: time.Minute})
			r := await(t, start(t.Context(), m.with(ids...)))

			if tt.wantErr != nil {
				if r.err == nil {
					t.Fatal("Run succeeded, want a forbidden error")
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(r.err.Error(), want) {
						t.Errorf("error %q does not contain %q", r.err, want)
					}
				}
				if !apierrors.IsForbidden(r.err) {
					t.Errorf("error %v does not wrap the Forbidden status", r.err)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			n := len(ids)
			if diff := cmp.Diff(Summary{Reattached: n, Changed: n, Terminal: n}, r.sum); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			for _, id := range ids {
				if s := state(t, st, id); s != store.StateExited {
					t.Errorf("%s: state %s, want exited", id, s)
				}
			}
			// Each resource is listed cluster-wide (refused or not), then
			// once in each namespace when it was refused; never a GET.
			lists := map[string][]string{}
			for _, a := range client.Actions() {
				switch {
				case a.GetVerb() == "get":
					t.Errorf("GET %s %s/%s", a.GetResource().Resource, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
				case a.GetVerb() == "list" && a.GetNamespace() != "":
					lists[a.GetResource().Resource] = append(lists[a.GetResource().Resource], a.GetNamespace())
				case a.GetVerb() == "list":
					lists[a.GetResource().Resource+" cluster-wide"] = nil
				}
			}
			want := map[string][]string{}
			for res, nss := range tt.wantLists {
				want[res+" cluster-wide"] = nil
				if nss != nil {
					want[res] = nss
				}
			}
			for _, nss := range lists {
				slices.Sort(nss)
			}
			if diff := cmp.Diff(want, lists); diff != "" {
				t.Errorf("lists (-want +got):\n%s", diff)
			}
		})
	}
}

// nsList is ns-00 … ns-<n-1>.
func nsList(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("ns-%02d", i))
	}
	return out
}

// with is Add for chaining in tests.
func (m *Monitor) with(ids ...runtimeid.ID) *Monitor {
	m.Add(ids...)
	return m
}

func TestCancelFlushesTheQueue(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateRunning)
	m := New(fake.NewClientset(), st, Options{Owner: owner("a")})
	m.Add(id)
	// An observation made just before the interruption.
	m.enqueue(item{ids: []string{id.String()}, obs: Observation{Type: store.ContainerExited, Message: "0", UID: "u1"}, at: time.Now()})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := await(t, start(ctx, m))
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("Run error %v, want context.Canceled", r.err)
	}
	if diff := cmp.Diff([]string{"Created  u1", "ContainerExited 0 u1"}, history(t, st, id)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

func TestFollowKeepsRunning(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateRunning)
	client := fake.NewClientset(job("ns", "task", "u1", complete))
	m := New(client, st, Options{Owner: owner("a"), Follow: true})
	m.Add(id)
	ctx, cancel := context.WithCancel(t.Context())
	done := start(ctx, m)
	eventually(t, "exited", func() bool { return state(t, st, id) == store.StateExited })
	select {
	case r := <-done:
		t.Fatalf("Run returned with Follow: %+v", r)
	default:
	}
	cancel()
	r := await(t, done)
	if r.err != nil {
		t.Errorf("Run with Follow returned %v on cancel, want nil", r.err)
	}
	if diff := cmp.Diff(Summary{Reattached: 1, Changed: 1, Terminal: 1}, r.sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// TestTwoMonitors: two processes (two owners) watching the same IDs in the
// same database record each event once, and both report every event.
func TestTwoMonitors(t *testing.T) {
	st := newStore(t)
	const n = 10
	var ids []runtimeid.ID
	var objs []runtime.Object
	for i := range n {
		id := jobID("ns", fmt.Sprintf("task-%d", i))
		ids = append(ids, id)
		record(t, st, id, fmt.Sprintf("u%d", i), store.StateRunning)
		objs = append(objs, job("ns", id.Name, fmt.Sprintf("u%d", i), batchv1.JobStatus{Active: 1}))
	}
	client := fake.NewClientset(objs...)
	isWatched := watched(client)
	var seenA, seenB collector
	a := New(client, st, Options{Owner: owner("a"), OnEvent: seenA.on})
	b := New(client, st, Options{Owner: owner("b"), OnEvent: seenB.on})
	a.pollEvery, b.pollEvery = 10*time.Millisecond, 10*time.Millisecond
	a.Add(ids...)
	b.Add(ids...)
	doneA, doneB := start(t.Context(), a), start(t.Context(), b)
	eventually(t, "both monitors registered", func() bool { return registered(a) == n && registered(b) == n })
	eventually(t, "the job watches", func() bool {
		// one per monitor holding leases (the other follows the store)
		return isWatched("jobs") && count(client)["watch jobs"] == leasing(a)+leasing(b)
	})
	for _, id := range ids {
		updateJobStatus(t, client, "ns", id.Name, complete)
	}
	ra, rb := await(t, doneA), await(t, doneB)
	if ra.err != nil || rb.err != nil {
		t.Fatal(ra.err, rb.err)
	}
	if ra.sum.Reattached != n || rb.sum.Reattached != n || ra.sum.Terminal != n || rb.sum.Terminal != n {
		t.Errorf("summaries %+v %+v, want %d reattached and terminal each", ra.sum, rb.sum, n)
	}
	if c := ra.sum.Changed + rb.sum.Changed; c != n {
		t.Errorf("changed %d + %d, want %d in all", ra.sum.Changed, rb.sum.Changed, n)
	}
	for _, id := range ids {
		if diff := cmp.Diff([]string{"Created  " + "u" + strings.TrimPrefix(id.Name, "task-"), "ContainerExited 0 u" + strings.TrimPrefix(id.Name, "task-")}, history(t, st, id)); diff != "" {
			t.Errorf("%s history (-want +got):\n%s", id, diff)
		}
	}
	var want []string
	for _, id := range ids {
		want = append(want, id.String()+" ContainerExited 0")
	}
	sort.Strings(want)
	for name, c := range map[string]*collector{"a": &seenA, "b": &seenB} {
		got := c.list()
		sort.Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("OnEvent of %s (-want +got):\n%s", name, diff)
		}
	}
}

// leasing is 1 when m observes some IDs itself.
func leasing(m *Monitor) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs.all() {
		if s.has(flagWatched) {
			return 1
		}
	}
	return 0
}

// snapshotted reports whether id's object was checked after the sync.
func snapshotted(m *Monitor, id runtimeid.ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs.get(id.String())
	return s != nil && s.has(flagSnapshotted)
}

// registered counts the IDs m watches, leased or through the store.
func registered(m *Monitor) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for s := range m.subs.all() {
		if s.has(flagPassive) || s.has(flagWatched) {
			n++
		}
	}
	return n
}

// TestLeaseTakeover: IDs leased by an owner that stopped renewing are taken
// over at a heartbeat.
func TestLeaseTakeover(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateRunning)
	ghost := owner("ghost")
	if got, err := st.AcquireLeases(t.Context(), ghost, []string{id.String()}, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("ghost lease: %q %v", got, err)
	}
	// The ghost is alive, renewing its lease, until the Monitor follows
	// the ID passively; then it dies. Without the renewals the test
	// depended on the Monitor starting within the 300 ms TTL of the
	// acquisition: run alone, the first fake clientset's setup took
	// longer, the lease was stale at the Monitor's first look and it
	// was never passive.
	ghostCtx, killGhost := context.WithCancel(t.Context())
	ghostDone := make(chan struct{})
	go func() {
		defer close(ghostDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ghostCtx.Done():
				return
			case <-tick.C:
				if err := st.RenewLeases(ghostCtx, ghost); err != nil && ghostCtx.Err() == nil {
					t.Errorf("ghost renewal: %v", err)
				}
			}
		}
	}()
	defer func() { killGhost(); <-ghostDone }()
	client := fake.NewClientset(job("ns", "task", "u1", complete))
	m := New(client, st, Options{Owner: owner("a"), LeaseTTL: 300 * time.Millisecond})
	m.pollEvery = 10 * time.Millisecond
	m.Add(id)
	done := start(t.Context(), m)
	eventually(t, "the ID followed through the store", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		s := m.subs.get(id.String())
		return s != nil && s.has(flagPassive)
	})
	killGhost()
	<-ghostDone
	r := await(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if diff := cmp.Diff([]string{"Created  u1", "ContainerExited 0 u1"}, history(t, st, id)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Summary{Reattached: 1, Changed: 1, Terminal: 1}, r.sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// TestRequestRechecksHeldID: a request another process records for an ID
// this Monitor holds may change nothing in the cluster (a start of a
// deployment already running, of a job still running): no watch event
// comes, yet the holder records the observation again under the record's
// new epoch, from its cache, within a poll and without a GET.
func TestRequestRechecksHeldID(t *testing.T) {
	ready := appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	tests := []struct {
		name    string
		id      runtimeid.ID
		obj     runtime.Object
		request store.EventType
	}{
		{name: "start of a running deployment", id: deployID("ns", "web"), obj: deployment("ns", "web", "u1", 1, ready), request: store.StartRequested},
		{name: "resume of a running deployment", id: deployID("ns", "web"), obj: deployment("ns", "web", "u1", 1, ready), request: store.ResumeRequested},
		{name: "start of a running job", id: jobID("ns", "task"), obj: job("ns", "task", "u1", batchv1.JobStatus{Active: 1}), request: store.StartRequested},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			st, other := openStore(t, path), openStore(t, path)
			record(t, st, tt.id, "u1", store.StateStarting)
			client := fake.NewClientset(tt.obj)
			var got collector
			m := New(client, st, Options{Owner: owner("a"), Follow: true, OnEvent: got.on})
			m.pollEvery = 10 * time.Millisecond
			m.Add(tt.id)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := start(ctx, m)
			eventually(t, "running", func() bool { return state(t, st, tt.id) == store.StateRunning })

			if _, _, err := other.Apply(t.Context(), store.Transition{RuntimeID: tt.id.String(), Type: tt.request, Message: "no-op"}); err != nil {
				t.Fatal(err)
			}
			want := []string{"Created  u1", "ContainerStarted  u1", string(tt.request) + " no-op u1", "ContainerStarted  u1"}
			eventually(t, "ContainerStarted recorded again", func() bool { return len(history(t, st, tt.id)) == len(want) })
			cancel()
			r := await(t, done)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if diff := cmp.Diff(want, history(t, st, tt.id)); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			if s := state(t, st, tt.id); s != store.StateRunning {
				t.Errorf("state = %s, want running", s)
			}
			started := tt.id.String() + " ContainerStarted"
			if diff := cmp.Diff([]string{started, started}, got.list()); diff != "" {
				t.Errorf("OnEvent (-want +got):\n%s", diff)
			}
			resource := tt.id.Kind + "s"
			wantReq := map[string]int{"list " + resource: 1, "watch " + resource: 1, "list pods": 1, "watch pods": 1}
			if tt.id.Kind == runtimeid.KindDeployment {
				wantReq["list replicasets"], wantReq["watch replicasets"] = 1, 1
			}
			if diff := cmp.Diff(wantReq, count(client)); diff != "" {
				t.Errorf("API requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeleteRequestedOfHeldID: a delete recorded by another process makes
// the record terminal, and the holder still records the object's end when
// it sees it go, as before polling requests.
func TestDeleteRequestedOfHeldID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, other := openStore(t, path), openStore(t, path)
	id := deployID("ns", "web")
	record(t, st, id, "u1", store.StateStarting)
	client := fake.NewClientset(deployment("ns", "web", "u1", 1, appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}))
	isWatched := watched(client)
	m := New(client, st, Options{Owner: owner("a")})
	m.pollEvery = time.Millisecond
	m.Add(id)
	done := start(t.Context(), m)
	eventually(t, "the deployment watch", func() bool { return isWatched("deployments") })
	eventually(t, "running", func() bool { return state(t, st, id) == store.StateRunning })

	if _, _, err := other.Apply(t.Context(), store.Transition{RuntimeID: id.String(), Type: store.DeleteRequested, Message: "deleted"}); err != nil {
		t.Fatal(err)
	}
	// The poll has read the request.
	eventually(t, "the request polled", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		s := m.subs.get(id.String())
		return s != nil && s.state() == codeOf(store.StateDeleted)
	})
	if err := client.AppsV1().Deployments("ns").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []string{"Created  u1", "ContainerStarted  u1", "DeleteRequested deleted u1", "ContainerDeleted  u1"}
	if diff := cmp.Diff(want, history(t, st, id)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// TestLatency: 1,000 jobs completing within 5s are all recorded, each after
// its status update. How long that takes is measured by BenchmarkLatency
// (make bench), not asserted here: the race detector and a shared machine
// slow it many times over.
func TestLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	delays, _ := latencyRun(t, 1000)
	for i, d := range delays {
		if d < 0 {
			t.Errorf("event %d recorded %s before its status update", i, -d)
		}
	}
}

// BenchmarkLatency measures the delay from a job's status update on the
// (simple) fake API to its event recorded and handed to OnEvent, for 1,000
// jobs completing within 5s; it reports p50 and p99.
func BenchmarkLatency(b *testing.B) {
	var p50, p99, w99 time.Duration
	for b.Loop() {
		delays, writer := latencyRun(b, 1000)
		p50, p99, w99 = max(p50, delays[len(delays)/2]), max(p99, delays[len(delays)*99/100]), max(w99, writer[len(writer)*99/100])
	}
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.ReportMetric(float64(w99.Milliseconds()), "writer-p99-ms")
}

// latencyRun completes n jobs at a steady pace and returns, sorted, the
// delays from each status update to OnEvent and from each event's record
// time to OnEvent. It uses the simple fake (no field management) to leave
// the CPU to the monitor.
func latencyRun(t testing.TB, n int) (delays, writerDelays []time.Duration) {
	st := newStore(t)
	var ids []runtimeid.ID
	var objs []runtime.Object
	for i := range n {
		id := jobID("ns", fmt.Sprintf("t-%d", i))
		ids = append(ids, id)
		objs = append(objs, job("ns", id.Name, fmt.Sprintf("u%d", i), batchv1.JobStatus{Active: 1}))
	}
	for _, id := range ids {
		record(t, st, id, "", store.StateRunning)
	}
	client := fake.NewSimpleClientset(objs...)
	isWatched := watched(client)
	var mu sync.Mutex
	updated := map[string]time.Time{}
	m := New(client, st, Options{Owner: owner("a"), OnEvent: func(e store.Event) {
		at := time.Now()
		mu.Lock()
		delays = append(delays, at.Sub(updated[e.RuntimeID]))
		writerDelays = append(writerDelays, at.Sub(e.Time))
		mu.Unlock()
	}})
	m.Add(ids...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := start(ctx, m)
	eventually(t, "the job watch", func() bool { return isWatched("jobs") })
	// n completions at 5ms (the fake's watch also panics when its consumer
	// falls 100 events behind).
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for _, id := range ids {
		<-pace.C
		j, err := client.BatchV1().Jobs("ns").Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		j.Status = complete
		mu.Lock()
		updated[id.String()] = time.Now()
		mu.Unlock()
		if _, err := client.BatchV1().Jobs("ns").UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := await(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(delays) != n {
		t.Fatalf("%d events, want %d", len(delays), n)
	}
	slices.Sort(delays)
	slices.Sort(writerDelays)
	t.Logf("update to OnEvent: p50 %s p99 %s max %s; handler to OnEvent: p50 %s p99 %s max %s",
		delays[n/2], delays[n*99/100], delays[n-1], writerDelays[n/2], writerDelays[n*99/100], writerDelays[n-1])
	return delays, writerDelays
}

// TestCompactedObservationRoundTrip: the cache's encoding of an observation
// gives back what the mapping returned, every field of it.
func TestCompactedObservationRoundTrip(t *testing.T) {
	code := int32(3)
	started := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	finished := started.Add(90*time.Second + 5*time.Millisecond)
	meta := &metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u1", ResourceVersion: "42"}
	for _, o := range []Observation{
		{Type: store.ContainerStarted, UID: "u1"},
		{Type: store.ContainerFailed, Message: "BackoffLimitExceeded", UID: "u1",
			Result: store.Result{Reason: "BackoffLimitExceeded", ExitCode: &code, StartedAt: &started, FinishedAt: &finished}},
		{Type: store.ContainerExited, Message: "0", UID: "u1", Result: store.Result{Reason: store.ReasonStopped}},
	} {
		c, ok := newCompacted(meta, o, true)
		if !ok {
			t.Fatalf("%v: not encoded", o)
		}
		got, ok := c.observation()
		if diff := cmp.Diff(o, got); !ok || diff != "" {
			t.Errorf("round trip of %s (ok %v; -want +got):\n%s", o.Type, ok, diff)
		}
		if hashOf(got) != hashOf(o) {
			t.Errorf("round trip of %s changed its hash", o.Type)
		}
	}
	if _, ok := newCompacted(meta, Observation{Type: store.ContainerStarted, UID: "other"}, true); ok {
		t.Error("an observation of another UID was encoded")
	}
	if c, ok := newCompacted(meta, Observation{}, false); !ok {
		t.Error("an object without observation was not kept")
	} else if _, ok := c.observation(); ok {
		t.Error("an object without observation observes")
	}
}

// TestWriterRecordsDuringHistoryPoll: the history poll runs beside the
// writer, not on its goroutine: while a poll is held (as a poll of the
// 100,000 events of an initial sync takes most of a second), what the
// informers see is still recorded.
func TestWriterRecordsDuringHistoryPoll(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateStarting)
	client := fake.NewClientset(job("ns", "task", "u1", batchv1.JobStatus{}))
	isWatched := watched(client)
	var got collector
	m := New(client, st, Options{Owner: owner("a"), Follow: true, OnEvent: got.on})
	m.pollEvery = time.Millisecond
	polling, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	m.beforePoll = func() {
		once.Do(func() {
			close(polling)
			<-release // the first poll lasts until the test ends
		})
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	m.Add(id)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := start(ctx, m)
	eventually(t, "the job watch", func() bool { return isWatched("jobs") })
	select {
	case <-polling:
	case <-time.After(30 * time.Second):
		t.Fatal("no history poll began")
	}

	updateJobStatus(t, client, "ns", "task", batchv1.JobStatus{Active: 1, StartTime: &metav1.Time{Time: time.Now()}})
	// OnEvent comes after the commit: wait for both, not only the state.
	eventually(t, "running recorded and handed to OnEvent while the poll is held", func() bool {
		return state(t, st, id) == store.StateRunning && len(got.list()) > 0
	})
	if diff := cmp.Diff([]string{id.String() + " ContainerStarted"}, got.list()); diff != "" {
		t.Errorf("OnEvent (-want +got):\n%s", diff)
	}
	close(release)
	cancel()
	if r := await(t, done); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestFollowReadsEveryPage: a poll reads the history a page at a time, to
// its end.
func TestFollowReadsEveryPage(t *testing.T) {
	st := newStore(t)
	for i := range 2*followPage + 10 {
		record(t, st, jobID("ns", fmt.Sprintf("j-%d", i)), "", store.StateRunning)
	}
	last, err := st.LastEventSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := New(fake.NewClientset(), st, Options{Owner: owner("a")})
	m.seqSet, m.nHeld = true, 1 // polled from the start, some lease held
	m.follow(t.Context())
	if m.lastSeq != last {
		t.Errorf("lastSeq = %d, want %d: the whole history read", m.lastSeq, last)
	}
}

// TestInitialListDoesNotWaitForWriter: the workload informer's handler does
// not map the objects of its initial list (snapshotAll observes them from
// the synced cache, at the writer's pace), so the sync ends with nothing
// recording: mapped in the handler, the objects past maxQueue waited for
// the writer there, and client-go buffered the notifications of all the
// others meanwhile. Then snapshotAll hands every object to the writer.
func TestInitialListDoesNotWaitForWriter(t *testing.T) {
	st := newStore(t)
	n := 2*maxQueue + 10
	var objs []runtime.Object
	for i := range n {
		name := fmt.Sprintf("task-%04d", i)
		objs = append(objs, job("ns", name, fmt.Sprintf("u%d", i), batchv1.JobStatus{Active: 1}))
	}
	client := fake.NewClientset(objs...)
	m := New(client, st, Options{Owner: owner("a")})
	for i := range n {
		m.Add(jobID("ns", fmt.Sprintf("task-%04d", i)))
	}
	m.mu.Lock()
	for s := range m.subs.all() {
		s.set(flagWatched, true)
	}
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	defer func() {
		cancel()
		m.qmu.Lock()
		m.qclosed = true // no writer: release any handler waiting for room
		m.qcond.Broadcast()
		m.qmu.Unlock()
		m.bg.Wait()
		m.shutdownInformers()
	}()
	// No writer runs: nothing leaves the queue.
	if _, err := m.informerFor(ctx, "ns", runtimeid.KindJob); err != nil {
		t.Fatal(err)
	}
	synced := false
	deadline := time.After(30 * time.Second)
	for !synced {
		select {
		case r := <-m.syncCh:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.inf.kind == runtimeid.KindJob {
				synced = true
				m.snapshotAll(ctx, r.inf)
			}
		case <-deadline:
			t.Fatalf("the job informer did not sync with no writer running (%d queued)", m.queueLen())
		}
	}
	// snapshotAll queues at the writer's pace: drain as the writer would.
	seen := map[string]bool{}
	for len(seen) < n {
		m.qmu.Lock()
		for len(m.queue) == 0 {
			m.qmu.Unlock()
			select {
			case <-m.qwake:
			case <-time.After(30 * time.Second):
				t.Fatalf("%d of %d objects observed", len(seen), n)
			}
			m.qmu.Lock()
		}
		items := m.queue
		m.queue = nil
		m.qcond.Broadcast()
		m.qmu.Unlock()
		for _, it := range items {
			if it.obs.Type == store.ContainerStarted {
				seen[it.ids[0]] = true
			}
		}
	}
}

func (m *Monitor) queueLen() int {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	return len(m.queue)
}
