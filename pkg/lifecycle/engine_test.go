package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

func newEngine(t *testing.T) (*Engine, *fake.Clientset) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := fakeCluster()
	return &Engine{Store: st, Client: func(string) (kubernetes.Interface, error) { return c, nil }}, c
}

func history(t *testing.T, st *store.Store, id string) []string {
	t.Helper()
	evs, err := st.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type))
	}
	return out
}

var web = spec.ContainerSpec{Name: "web", Image: "nginx:1.27"}

// TestIntentBeforeAction: when the API server sees a verb's request, the
// record already says what was asked, with the new epoch.
func TestIntentBeforeAction(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	var seen []string
	c.PrependReactor("create", "deployments", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		w, err := e.Store.Get(ctx, "k8s-default|deployment|web")
		if err != nil {
			t.Errorf("create reached the API server with no record: %v", err)
			return false, nil, nil
		}
		seen = append(seen, string(w.State)+"/"+string(w.Request))
		return false, nil, nil
	})
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() == "scale" {
			w, _ := e.Store.Get(ctx, "k8s-default|deployment|web")
			seen = append(seen, string(w.State)+"/"+string(w.Request))
		}
		return false, nil, nil
	})
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	if w.UID == "" || w.State != store.StateCreated || w.Epoch != 1 {
		t.Errorf("after create: %+v", w)
	}
	if _, err := e.Apply(ctx, w, store.StopRequested); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"created/Created", "stopping/StopRequested"}, seen); diff != "" {
		t.Errorf("record when the API server was called (-want +got):\n%s", diff)
	}
}

// TestFailedActionIsCompensated: a refused action records RequestFailed
// and puts the state back; the epoch stays raised.
func TestFailedActionIsCompensated(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	c.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() == "scale" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no"))
		}
		return false, nil, nil
	})
	res, err := e.Apply(ctx, w, store.StopRequested)
	if err == nil || !apierrors.IsForbidden(errors.Unwrap(err)) && !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("Apply = %v, want forbidden", err)
	}
	got := res.Workload
	if got.State != store.StateCreated || got.Epoch != 2 || !strings.Contains(got.Message, "forbidden") {
		t.Errorf("record after a refused stop: state %s epoch %d message %q; want created, 2, the error", got.State, got.Epoch, got.Message)
	}
	if diff := cmp.Diff([]string{"Created", "StopRequested", "RequestFailed"}, history(t, e.Store, w.RuntimeID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// TestFailedCreateLeavesNothing: a create the API server refuses leaves no
// record for a new ID, and the old record for a known one.
func TestFailedCreateLeavesNothing(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	c.PrependReactor("create", "services", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "web-svc", errors.New("quota"))
	})
	s := web
	s.ExposeService, s.ExposedPort = true, 80
	if _, _, err := e.Create(ctx, "k8s", "default", s); err == nil {
		t.Fatal("Create succeeded")
	}
	if _, err := e.Store.Get(ctx, "k8s-default|deployment|web"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("record after a refused create: %v, want none", err)
	}
	if ds, _ := c.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{}); len(ds.Items) != 0 {
		t.Errorf("%d deployments left after a refused create", len(ds.Items))
	}

	// Known before (deleted): put back as it was.
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, w, store.DeleteRequested); err != nil {
		t.Fatal(err)
	}
	before, _ := e.Store.Get(ctx, w.RuntimeID)
	if _, _, err := e.Create(ctx, "k8s", "default", s); err == nil {
		t.Fatal("Create succeeded")
	}
	after, _ := e.Store.Get(ctx, w.RuntimeID)
	if after.State != store.StateDeleted || after.UID != before.UID || after.Spec.ExposeService {
		t.Errorf("record after a refused re-create: %+v, want it as before (%+v)", after, before)
	}
}

// TestAlreadyThereIsConfirmedAtOnce: a stop of a stopped deployment and a
// start of a running one end in their state without a monitor.
func TestAlreadyThereIsConfirmedAtOnce(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	setStatus := func(ready int32) {
		d, _ := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		d.Status = appsv1.DeploymentStatus{Replicas: ready, ReadyReplicas: ready}
		if _, err := c.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(1)
	for i := range 2 {
		res, err := e.Apply(ctx, w, store.StartRequested)
		if err != nil {
			t.Fatal(err)
		}
		if res.Workload.State != store.StateRunning {
			t.Errorf("start %d of a running deployment: %s, want running", i+1, res.Workload.State)
		}
		w = res.Workload
	}
	setStatus(0)
	for i := range 2 {
		res, err := e.Apply(ctx, w, store.StopRequested)
		if err != nil {
			t.Fatal(err)
		}
		if res.Workload.State != store.StateExited {
			t.Errorf("stop %d of a stopped deployment: %s, want exited", i+1, res.Workload.State)
		}
		w = res.Workload
	}
	want := []string{"Created", "StartRequested", "ContainerStarted", "StartRequested", "ContainerStarted",
		"StopRequested", "ContainerExited", "StopRequested", "ContainerExited"}
	if diff := cmp.Diff(want, history(t, e.Store, w.RuntimeID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// dryRun answers a server-side dry-run create as the API server does when
// admission allows it: with the object, storing nothing.
func dryRun(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	if ca, ok := a.(k8stesting.CreateActionImpl); ok && len(ca.CreateOptions.DryRun) > 0 {
		return true, ca.GetObject(), nil
	}
	return false, nil, nil
}

// fakeCluster is a fake clientset that stamps UIDs on create and supports
// the deployments' scale subresource (the fake's tracker does not).
func fakeCluster() *fake.Clientset {
	c := fake.NewClientset()
	var seq atomic.Int64
	c.PrependReactor("create", "*", dryRun)
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", obj.GetName(), seq.Add(1))))
		}
		return false, nil, nil
	})
	c.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		obj, err := c.Tracker().Get(deploymentsGVR, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment)
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID, ResourceVersion: d.ResourceVersion},
			Spec: autoscalingv1.ScaleSpec{Replicas: *d.Spec.Replicas}}, nil
	})
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		obj, err := c.Tracker().Get(deploymentsGVR, a.GetNamespace(), sc.Name)
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment).DeepCopy()
		d.Spec.Replicas = &sc.Spec.Replicas
		if err := c.Tracker().Update(deploymentsGVR, d, d.Namespace); err != nil {
			return true, nil, err
		}
		return true, sc, nil
	})
	return c
}

// TestUnknownOutcomeStaysTransitional: an action whose outcome is unknown
// (the server timed out, the user interrupted) leaves the record starting
// or stopping for a monitor to settle, instead of putting back a terminal
// state that recover would skip while the object runs.
func TestUnknownOutcomeStaysTransitional(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want store.State
	}{
		{"server timeout", apierrors.NewServerTimeout(schema.GroupResource{Group: "apps", Resource: "deployments"}, "update", 1), store.StateStarting},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), store.StateStarting},
		{"interrupted", context.Canceled, store.StateStarting},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no")), store.StateExited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, c := newEngine(t)
			ctx := context.Background()
			w, _, err := e.Create(ctx, "k8s", "default", web)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Apply(ctx, w, store.StopRequested) // the fake confirms: exited
			if err != nil || res.Workload.State != store.StateExited {
				t.Fatalf("stop: %v, %s", err, res.Workload.State)
			}
			c.PrependReactor("update", "deployments", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
				return true, nil, tt.err
			})
			res, err = e.Apply(ctx, res.Workload, store.StartRequested)
			if err == nil {
				t.Fatal("start succeeded")
			}
			if res.Workload.State != tt.want {
				t.Errorf("state %s after %v, want %s", res.Workload.State, tt.err, tt.want)
			}
			if h := history(t, e.Store, w.RuntimeID); h[len(h)-1] != "RequestFailed" {
				t.Errorf("history %v, want RequestFailed last", h)
			}
		})
	}
}

// TestForeignObjectIsLeftAlone: an object of the recorded name with another
// UID is not the record's: no verb acts on it.
func TestForeignObjectIsLeftAlone(t *testing.T) {
	for _, verb := range []store.EventType{store.StopRequested, store.StartRequested, store.DeleteRequested} {
		t.Run(string(verb), func(t *testing.T) {
			e, c := newEngine(t)
			ctx := context.Background()
			w, _, err := e.Create(ctx, "k8s", "default", web)
			if err != nil {
				t.Fatal(err)
			}
			// Replaced behind gobrave's back by an object of the same name.
			if err := c.AppsV1().Deployments("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "theirs"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
			if _, err := c.AppsV1().Deployments("default").Create(ctx, other, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			c.ClearActions()
			res, err := e.Apply(ctx, w, verb)
			if err == nil || !strings.Contains(err.Error(), "another object (uid theirs") {
				t.Fatalf("Apply = %v, want a refusal naming the other object", err)
			}
			for _, a := range c.Actions() {
				if a.GetVerb() != "get" {
					t.Errorf("%s %s/%s sent to the other object", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
				}
			}
			if res.Workload.State != store.StateDeleted || res.Workload.UID != w.UID {
				t.Errorf("record %s uid %s, want deleted (the recorded object is gone) and %s", res.Workload.State, res.Workload.UID, w.UID)
			}
		})
	}
}

var task = spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: spec.KindJob}

// setJobStatus sets the job's status as the job controller would.
func setJobStatus(t *testing.T, c *fake.Clientset, st batchv1.JobStatus) {
	t.Helper()
	j, err := c.BatchV1().Jobs("default").Get(context.Background(), "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status = st
	if _, err := c.BatchV1().Jobs("default").UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var suspendedStatus = batchv1.JobStatus{Conditions: []batchv1.JobCondition{
	{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", Message: "Job suspended"}}}

// TestPauseJob: a job's pause records the intent with the kind's
// expectation (its suspension), suspends the job, and is paused at once
// when the controller has suspended it; a pause of a finished job is
// refused and puts the state back.
func TestPauseJob(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	w, _, err := e.Create(ctx, "k8s", "default", task)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Apply(ctx, w, store.PauseRequested)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Workload; got.State != store.StateStopping || got.Expect != store.ContainerPaused {
		t.Fatalf("after pause: state %s expect %s, want stopping until the job controller suspends it, expecting ContainerPaused", got.State, got.Expect)
	}
	j, _ := c.BatchV1().Jobs("default").Get(ctx, "task", metav1.GetOptions{})
	if j.Spec.Suspend == nil || !*j.Spec.Suspend || string(j.UID) != w.UID {
		t.Fatalf("job after pause: uid %s suspend %v", j.UID, j.Spec.Suspend)
	}
	setJobStatus(t, c, suspendedStatus)
	// A second pause of a suspended job is paused at once.
	res, err = e.Apply(ctx, res.Workload, store.PauseRequested)
	if err != nil || res.Workload.State != store.StatePaused || res.Workload.Message != store.SuspendedMessage {
		t.Fatalf("second pause: %v, state %s message %q; want paused, suspended", err, res.Workload.State, res.Workload.Message)
	}

	// resume unsuspends; the job completes; a pause then is refused.
	if _, err := e.Apply(ctx, res.Workload, store.ResumeRequested); err != nil {
		t.Fatal(err)
	}
	setJobStatus(t, c, batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}})
	cur, _ := e.Store.Get(ctx, w.RuntimeID)
	res, err = e.Apply(ctx, cur, store.PauseRequested)
	if err == nil || !strings.Contains(err.Error(), "nothing to pause: the job has finished") {
		t.Fatalf("pause of a finished job = %v, want a refusal", err)
	}
	if res.Workload.State != cur.State || res.Workload.Request != cur.Request {
		t.Errorf("after the refused pause: state %s request %s, want %s and %s back", res.Workload.State, res.Workload.Request, cur.State, cur.Request)
	}
	want := []string{"Created", "PauseRequested", "PauseRequested", "ContainerPaused", "ResumeRequested", "PauseRequested", "RequestFailed"}
	if diff := cmp.Diff(want, history(t, e.Store, w.RuntimeID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// TestRecoverStopOfASuspendedJob: a stop whose process died before it
// deleted the job, while the job was suspended from outside, is healed to
// paused: the suspension is the truth, and the stop never happened.
func TestRecoverStopOfASuspendedJob(t *testing.T) {
	e, c := newEngine(t)
	e.Owner = store.Owner{ID: "test/recover", PID: 1, Host: "test"}
	ctx := context.Background()
	w, _, err := e.Create(ctx, "k8s", "default", task)
	if err != nil {
		t.Fatal(err)
	}
	// The stop's intent, recorded by a process that died before the delete.
	if _, _, err := e.Store.Apply(ctx, store.Transition{RuntimeID: w.RuntimeID, Type: store.StopRequested, Expect: store.ContainerDeleted}); err != nil {
		t.Fatal(err)
	}
	j, _ := c.BatchV1().Jobs("default").Get(ctx, "task", metav1.GetOptions{})
	j.Spec.Suspend = ptr.To(true)
	if _, err := c.BatchV1().Jobs("default").Update(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setJobStatus(t, c, suspendedStatus)
	cur, _ := e.Store.Get(ctx, w.RuntimeID)
	ev, ok, err := e.Recover(ctx, cur)
	if err != nil || !ok || ev.Type != store.RequestFailed {
		t.Fatalf("Recover = %+v, %v, %v; want RequestFailed recorded", ev, ok, err)
	}
	if got, _ := e.Store.Get(ctx, w.RuntimeID); got.State != store.StatePaused || got.UID != w.UID {
		t.Errorf("after recover: state %s uid %s, want paused and %s", got.State, got.UID, w.UID)
	}
}
