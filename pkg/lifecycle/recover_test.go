package lifecycle

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// leftByDeadProcesses makes, in e's database and c, the records a killed
// process leaves (the intent recorded, the API call never made), in two
// namespaces, plus one whose verb a live process is carrying out. It
// returns the runtime IDs by name.
func leftByDeadProcesses(t *testing.T, e *Engine, c *fake.Clientset) map[string]string {
	t.Helper()
	ctx := context.Background()
	ids := map[string]string{}
	for _, x := range []struct{ ns, name string }{
		{"default", "stopped"}, {"default", "deleted"}, {"default", "gone"}, {"default", "busy"}, {"default", "fine"}, {"team", "api"},
	} {
		w, _, err := e.Create(ctx, "k8s", x.ns, spec.ContainerSpec{Name: x.name, Image: "nginx:1.27"})
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.AppsV1().Deployments(x.ns).Get(ctx, x.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
		if _, err := c.AppsV1().Deployments(x.ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ids[x.name] = w.RuntimeID
	}
	intent := func(name string, tr store.Transition) {
		tr.RuntimeID = ids[name]
		if _, _, err := e.Store.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	stop := store.Transition{Type: store.StopRequested, Expect: store.ContainerExited, Message: "scale to 0"}
	del := store.Transition{Type: store.DeleteRequested, Message: "delete"}
	intent("stopped", stop) // the stop never sent: it still runs
	intent("api", stop)
	intent("deleted", del) // the delete never sent: it still runs
	intent("gone", del)    // the delete sent, the process killed before its confirmation
	if err := c.Tracker().Delete(deploymentsGVR, "default", "gone"); err != nil {
		t.Fatal(err)
	}
	intent("busy", stop) // a live process is sending it
	host, _ := os.Hostname()
	live := store.Owner{ID: "live/verb", PID: os.Getpid(), Host: host}
	if got, err := e.Store.AcquireLeases(ctx, live, []string{verbLockPrefix + ids["busy"]}, LeaseTTL); err != nil || len(got) != 1 {
		t.Fatalf("lock of the live verb: %v, %v", got, err)
	}
	return ids
}

// TestRecoverAllInBulk: RecoverAll records what Recover, one record at a
// time, records, with one list of the kind per namespace instead of one
// read per record, and leaves alone a record whose verb a live process
// holds.
func TestRecoverAllInBulk(t *testing.T) {
	if _, err := os.Hostname(); err != nil {
		t.Skipf("no host name, so no live-process leases: %v", err)
	}
	ctx := context.Background()
	owner := store.Owner{ID: "test/recover", PID: 1, Host: "test"}

	// Per record: Engine.Recover on each, as recover did before.
	one, c1 := newEngine(t)
	one.Owner = owner
	ids := leftByDeadProcesses(t, one, c1)
	ws, err := one.Store.List(ctx, store.Filter{All: true, NoSpec: true})
	if err != nil {
		t.Fatal(err)
	}
	c1.ClearActions()
	for _, w := range ws {
		if _, _, err := one.Recover(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	gets := 0
	for _, a := range c1.Actions() {
		if a.GetVerb() == "get" {
			gets++
		}
	}
	if gets != 4 { // stopped, deleted, gone, api; not busy (locked), not fine (nothing to heal)
		t.Errorf("Recover per record made %d GETs, want 4: %v", gets, c1.Actions())
	}

	// In bulk.
	bulk, c2 := newEngine(t)
	bulk.Owner = owner
	leftByDeadProcesses(t, bulk, c2)
	c2.ClearActions()
	evs, err := bulk.RecoverAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range c2.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Resource+" "+a.GetNamespace())
	}
	if d := cmp.Diff([]string{"list deployments default", "list deployments team"}, got); d != "" {
		t.Errorf("RecoverAll's requests (-want +got):\n%s", d)
	}
	if len(evs) != 4 {
		t.Errorf("RecoverAll recorded %d events, want 4: %+v", len(evs), evs)
	}

	// The same records either way.
	type rec struct {
		State, UID, Message string
		Epoch               int
	}
	read := func(st *store.Store) map[string]rec {
		out := map[string]rec{}
		for name, id := range ids {
			w, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = rec{string(w.State), w.UID, w.Message, w.Epoch}
		}
		return out
	}
	want, have := read(one.Store), read(bulk.Store)
	// UIDs differ between the two fake clusters only by their sequence.
	for name := range want {
		if want[name].UID == "" || have[name].UID == "" {
			t.Errorf("%s has no UID: %+v, %+v", name, want[name], have[name])
		}
		w, h := want[name], have[name]
		w.UID, h.UID = "", ""
		want[name], have[name] = w, h
	}
	if d := cmp.Diff(want, have); d != "" {
		t.Errorf("records after RecoverAll differ from those after Recover per record (-Recover +RecoverAll):\n%s", d)
	}
	states := map[string]string{}
	for name, r := range have {
		states[name] = r.State
	}
	if d := cmp.Diff(map[string]string{
		"stopped": "running", "api": "running", "deleted": "running", "gone": "deleted", "busy": "stopping", "fine": "created",
	}, states); d != "" {
		t.Errorf("states after RecoverAll (-want +got):\n%s", d)
	}
}
