package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// newFake returns a fake clientset whose deployments support the scale
// subresource (the fake's tracker does not) and which stamps UIDs.
func newFake(objs ...k8sruntime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && obj.GetUID() == "" {
			obj.SetUID(types.UID("uid-" + obj.GetName() + "-" + time.Now().Format("150405.000000000")))
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

func mustID(t *testing.T, s string) runtimeid.ID {
	t.Helper()
	id, err := runtimeid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestCreateDeploymentWithService(t *testing.T) {
	ctx := context.Background()
	c := newFake()
	rt := New(c, "k8s")
	s := spec.ContainerSpec{Name: "web", Image: "nginx", ExposedPort: 80, ExposeService: true}
	got, err := rt.Create(ctx, s, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID.String() != "k8s-team-a|deployment|web" || got.UID == "" || got.Service != "web-svc" {
		t.Fatalf("Create = %+v", got)
	}
	svc, err := c.CoreV1().Services("team-a").Get(ctx, "web-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Labels[LabelWorkload] != "web" || svc.Spec.Selector[LabelWorkload] != "web" {
		t.Errorf("service = %+v", svc)
	}
}

func TestCreateJob(t *testing.T) {
	c := newFake()
	got, err := New(c, "k3s").Create(context.Background(), spec.ContainerSpec{Name: "batch-import-001", Image: "busybox", WorkloadKind: "job"}, "ai")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID.String() != "k3s-ai|job|batch-import-001" {
		t.Errorf("ID = %s", got.ID)
	}
	if _, err := c.BatchV1().Jobs("ai").Get(context.Background(), "batch-import-001", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestCreateErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "", Resource: "services"}
	tests := []struct {
		name       string
		spec       spec.ContainerSpec
		reactVerb  string
		reactRes   string
		reactErr   error
		existing   []k8sruntime.Object
		wantErr    string
		wantNoDeps bool
		wantCalls  int // API actions made
	}{
		{name: "invalid spec makes no call", spec: spec.ContainerSpec{Name: "Bad_Name", Image: "x"}, wantErr: "Bad_Name", wantCalls: 0},
		{name: "pull policy Never makes no call", spec: spec.ContainerSpec{Name: "x", Image: "x", PullPolicy: "Never"}, wantErr: "Never", wantCalls: 0},
		{name: "already exists", spec: spec.ContainerSpec{Name: "web", Image: "x"},
			existing: []k8sruntime.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}},
			wantErr:  "already exists", wantCalls: 1},
		{name: "forbidden", spec: spec.ContainerSpec{Name: "web", Image: "x"}, reactVerb: "create", reactRes: "deployments",
			reactErr: apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no RBAC")), wantErr: "forbidden", wantNoDeps: true, wantCalls: 1},
		{name: "service fails: deployment rolled back", spec: spec.ContainerSpec{Name: "web", Image: "x", ExposedPort: 80, ExposeService: true},
			reactVerb: "create", reactRes: "services", reactErr: apierrors.NewInternalError(errors.New("etcd down")), wantErr: "create service \"web-svc\"", wantNoDeps: true, wantCalls: 3},
		{name: "service exists: deployment rolled back", spec: spec.ContainerSpec{Name: "web", Image: "x", ExposedPort: 80, ExposeService: true},
			reactVerb: "create", reactRes: "services", reactErr: apierrors.NewAlreadyExists(gr, "web-svc"), wantErr: "already exists", wantNoDeps: true, wantCalls: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c := newFake(tt.existing...)
			if tt.reactErr != nil {
				c.PrependReactor(tt.reactVerb, tt.reactRes, func(k8stesting.Action) (bool, k8sruntime.Object, error) {
					return true, nil, tt.reactErr
				})
			}
			c.ClearActions()
			_, err := New(c, "k8s").Create(ctx, tt.spec, "ns")
			if err == nil || !contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if got := len(c.Actions()); got != tt.wantCalls {
				t.Errorf("%d API actions, want %d: %v", got, tt.wantCalls, c.Actions())
			}
			if tt.wantNoDeps {
				deps, _ := c.AppsV1().Deployments("ns").List(ctx, metav1.ListOptions{})
				if len(deps.Items) != 0 {
					t.Errorf("half-made deployment left: %v", deps.Items)
				}
			}
		})
	}
}

func TestStartStopDeployment(t *testing.T) {
	ctx := context.Background()
	c := newFake()
	rt := New(c, "k8s")
	created, err := rt.Create(ctx, spec.ContainerSpec{Name: "web", Image: "nginx"}, "default")
	if err != nil {
		t.Fatal(err)
	}
	replicas := func() int32 {
		d, err := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	}
	if found, err := rt.Stop(ctx, created.ID); err != nil || !found {
		t.Fatalf("Stop = %v, %v", found, err)
	}
	if got := replicas(); got != 0 {
		t.Errorf("after stop replicas = %d", got)
	}
	res, err := rt.Start(ctx, created.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := replicas(); got != 1 || res.UID != created.UID {
		t.Errorf("after start replicas = %d uid %q (want %q)", got, res.UID, created.UID)
	}
}

func TestScaleRetriesConflict(t *testing.T) {
	ctx := context.Background()
	c := newFake()
	rt := New(c, "k8s")
	created, err := rt.Create(ctx, spec.ContainerSpec{Name: "web", Image: "nginx"}, "default")
	if err != nil {
		t.Fatal(err)
	}
	conflicts := 2
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() == "scale" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("modified"))
		}
		return false, nil, nil
	})
	if _, err := rt.Stop(ctx, created.ID); err != nil {
		t.Fatalf("Stop with 2 conflicts: %v", err)
	}
	if conflicts != 0 {
		t.Errorf("conflicts left %d", conflicts)
	}
}

func TestStopMissingDeployment(t *testing.T) {
	found, err := New(newFake(), "k8s").Stop(context.Background(), mustID(t, "k8s-default|deployment|nope"))
	if found || err != nil {
		t.Fatalf("Stop(missing) = %v, %v; want false, nil", found, err)
	}
}

func TestJobStopStart(t *testing.T) {
	ctx := context.Background()
	c := newFake()
	rt := New(c, "k8s")
	s := spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job"}
	created, err := rt.Create(ctx, s, "default")
	if err != nil {
		t.Fatal(err)
	}
	// Start of a job that exists and runs: nothing to do.
	res, err := rt.Start(ctx, created.ID, &s)
	if err != nil || res.Recreated || res.UID != created.UID {
		t.Fatalf("Start(existing) = %+v, %v", res, err)
	}
	c.ClearActions()
	if found, err := rt.Stop(ctx, created.ID); err != nil || !found {
		t.Fatalf("Stop = %v, %v", found, err)
	}
	del := c.Actions()[0].(k8stesting.DeleteAction)
	if p := del.GetDeleteOptions().PropagationPolicy; p == nil || *p != metav1.DeletePropagationForeground {
		t.Errorf("stop of a job must delete with foreground propagation, got %v", p)
	}
	// Gone and never recorded: a clear error.
	if _, err := rt.Start(ctx, created.ID, nil); !errors.Is(err, ErrGone) {
		t.Fatalf("Start(gone, no spec) = %v, want ErrGone", err)
	}
	// Gone but recorded: created again from the spec.
	res, err = rt.Start(ctx, created.ID, &s)
	if err != nil || !res.Recreated || res.UID == created.UID {
		t.Fatalf("Start(gone, spec) = %+v, %v", res, err)
	}
}

func TestStartFinishedJobRunsAgain(t *testing.T) {
	ctx := context.Background()
	done := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "default", UID: "old"},
		Status:     batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}},
	}
	c := newFake(done)
	s := spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job"}
	res, err := New(c, "k8s").Start(ctx, mustID(t, "k8s-default|job|task"), &s)
	if err != nil || !res.Recreated || res.UID == "old" {
		t.Fatalf("Start(finished) = %+v, %v", res, err)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	c := newFake()
	rt := New(c, "k8s")
	created, err := rt.Create(ctx, spec.ContainerSpec{Name: "web", Image: "nginx", ExposedPort: 80, ExposeService: true}, "default")
	if err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	found, err := rt.Delete(ctx, created.ID)
	if err != nil || !found {
		t.Fatalf("Delete = %v, %v", found, err)
	}
	acts := c.Actions()
	// The deployment first, under its UID precondition when given, then its Service.
	if len(acts) != 2 || acts[0].GetResource().Resource != "deployments" || acts[1].GetResource().Resource != "services" {
		t.Fatalf("want deployment then service deleted, got %v", acts)
	}
	// Deleting again: not found is fine, reported as not found.
	found, err = rt.Delete(ctx, created.ID)
	if err != nil || found {
		t.Fatalf("second Delete = %v, %v", found, err)
	}
	// A server error is reported with the ID.
	c.PrependReactor("delete", "deployments", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("apiserver overloaded")
	})
	if _, err := rt.Delete(ctx, created.ID); err == nil || !contains(err.Error(), created.ID.String()) {
		t.Fatalf("Delete with 503 = %v", err)
	}
}

// TestActionsCarryTheUID: stop, pause and delete act only on the object of
// the UID the engine read; one of the name with another UID (replaced in
// between) is left alone with a Conflict, and nothing else is touched.
func TestActionsCarryTheUID(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{runtimeid.KindDeployment, runtimeid.KindJob} {
		t.Run(kind, func(t *testing.T) {
			c := newFake()
			rt := New(c, "k8s")
			created, err := rt.Create(ctx, spec.ContainerSpec{Name: "web", Image: "nginx", WorkloadKind: kind, ExposedPort: 80, ExposeService: kind == runtimeid.KindDeployment}, "default")
			if err != nil {
				t.Fatal(err)
			}
			// The fake's tracker ignores delete preconditions: enforce them as
			// the API server does (409 Conflict).
			c.PrependReactor("delete", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
				pre := a.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
				if pre == nil || pre.UID == nil {
					return false, nil, nil
				}
				obj, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), a.(k8stesting.DeleteAction).GetName())
				if err != nil {
					return true, nil, err
				}
				if got := obj.(metav1.Object).GetUID(); got != *pre.UID {
					return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), a.(k8stesting.DeleteAction).GetName(),
						fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, got))
				}
				return false, nil, nil
			})
			k, _ := KindOf(kind)
			stale := types.UID("the-replaced-one")
			for _, act := range []struct {
				name string
				do   func() (bool, error)
			}{
				{"stop", func() (bool, error) { return k.Stop(ctx, c, created.ID, stale) }},
				{"pause", func() (bool, error) { return k.Pause(ctx, c, created.ID, stale) }},
				{"delete", func() (bool, error) { return k.Delete(ctx, c, created.ID, stale) }},
			} {
				_, err := act.do()
				var status apierrors.APIStatus
				conflict := errors.As(err, &status) && status.Status().Code == 409
				if !conflict && !strings.Contains(fmt.Sprint(err), "another job of the name") {
					t.Errorf("%s of another UID: %v, want a conflict", act.name, err)
				}
			}
			obj, err := k.Get(ctx, c, "default", "web")
			if err != nil {
				t.Fatalf("the object is gone after actions on another UID: %v", err)
			}
			if kind == runtimeid.KindDeployment {
				if _, err := c.CoreV1().Services("default").Get(ctx, ServiceName("web"), metav1.GetOptions{}); err != nil {
					t.Errorf("the service is gone after a refused delete: %v", err)
				}
			}
			if found, err := k.Delete(ctx, c, created.ID, obj.GetUID()); err != nil || !found {
				t.Errorf("delete of its own UID: %v, %v", found, err)
			}
		})
	}
}

func pod(name, ns, workload string, created time.Time, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelWorkload: workload}, CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{NodeName: "node-" + name, Containers: []corev1.Container{{Name: workload, Image: "img:" + name}}},
		Status: corev1.PodStatus{Phase: phase, PodIP: "10.0.0." + name[len(name)-1:],
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{RestartCount: 2}}},
	}
}

// controlledBy makes owner (kind, uid) the controller of obj, as the job and
// ReplicaSet controllers do. A job's pods also get the job controller's label.
func controlledBy[T metav1.Object](obj T, kind string, uid types.UID) T {
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: "v1", Kind: kind, Name: "owner-" + string(uid), UID: uid, Controller: ptr(true),
	}))
	if kind == "Job" {
		l := obj.GetLabels()
		l[batchv1.ControllerUidLabel] = string(uid)
		obj.SetLabels(l)
	}
	return obj
}

func replicaSet(name, ns, workload string, uid types.UID) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid,
		Labels: map[string]string{LabelWorkload: workload, "pod-template-hash": name}}}
}

// TestNewestPod: pods are found by ownership, never by the label alone. One
// namespace holds a deployment and a job both named web, an old and a new
// ReplicaSet of the deployment, a look-alike ReplicaSet and look-alike pods
// that are newer than every real one.
func TestNewestPod(t *testing.T) {
	now := time.Now()
	objs := []k8sruntime.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "job-web"}},
		controlledBy(replicaSet("web-new", "default", "web", "rs-new"), "Deployment", "dep-web"),
		controlledBy(replicaSet("web-old", "default", "web", "rs-old"), "Deployment", "dep-web"),
		replicaSet("web-fake", "default", "web", "rs-fake"), // labelled, owned by no deployment
		controlledBy(pod("dep-old-1", "default", "web", now.Add(-time.Hour), corev1.PodRunning), "ReplicaSet", "rs-old"),
		controlledBy(pod("dep-new-2", "default", "web", now, corev1.PodRunning), "ReplicaSet", "rs-new"),
		controlledBy(pod("dep-pending-3", "default", "web", now.Add(time.Minute), corev1.PodPending), "ReplicaSet", "rs-new"),
		controlledBy(pod("job-4", "default", "web", now.Add(2*time.Minute), corev1.PodRunning), "Job", "job-web"),
		// Look-alikes, all newer than the real pods.
		pod("lookalike-5", "default", "web", now.Add(time.Hour), corev1.PodRunning),
		controlledBy(pod("fake-rs-6", "default", "web", now.Add(time.Hour), corev1.PodRunning), "ReplicaSet", "rs-fake"),
		controlledBy(pod("other-job-7", "default", "web", now.Add(time.Hour), corev1.PodRunning), "Job", "job-other"),
		func() *corev1.Pod { // the job's label without the job's ownership
			p := pod("forged-8", "default", "web", now.Add(time.Hour), corev1.PodRunning)
			p.Labels[batchv1.ControllerUidLabel] = "job-web"
			return p
		}(),
		// The deployment as an owner of a pod directly: not how a Deployment owns pods.
		controlledBy(pod("direct-9", "default", "web", now.Add(time.Hour), corev1.PodRunning), "Deployment", "dep-web"),
	}
	tests := []struct {
		name      string
		id, uid   string
		running   bool
		wantPod   string
		wantErr   error
		wantCalls []string // verb resource, in order
	}{
		{name: "deployment: newest of its ReplicaSets' pods", id: "k8s-default|deployment|web", uid: "dep-web", wantPod: "dep-pending-3",
			wantCalls: []string{"list replicasets", "list pods"}},
		{name: "deployment: newest running", id: "k8s-default|deployment|web", uid: "dep-web", running: true, wantPod: "dep-new-2"},
		{name: "job: its own pod, not the deployment's", id: "k8s-default|job|web", uid: "job-web", wantPod: "job-4",
			wantCalls: []string{"list pods"}},
		{name: "old record without UID: the deployment there now", id: "k8s-default|deployment|web", running: true, wantPod: "dep-new-2",
			wantCalls: []string{"get deployments", "list replicasets", "list pods"}},
		{name: "old record without UID: the job there now", id: "k8s-default|job|web", wantPod: "job-4",
			wantCalls: []string{"get jobs", "list pods"}},
		{name: "recorded UID of an older deployment", id: "k8s-default|deployment|web", uid: "dep-gone", wantErr: ErrNoPod,
			wantCalls: []string{"list replicasets"}},
		{name: "recorded UID of an older job", id: "k8s-default|job|web", uid: "job-gone", wantErr: ErrNoPod},
		{name: "no UID and gone from the cluster", id: "k8s-default|job|gone", wantErr: ErrNoPod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFake(objs...)
			got, err := New(c, "k8s").NewestPod(context.Background(), mustID(t, tt.id), tt.uid, tt.running)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got.Name != tt.wantPod {
				t.Errorf("pod %s, want %s", got.Name, tt.wantPod)
			}
			if tt.wantCalls != nil {
				var calls []string
				for _, a := range c.Actions() {
					calls = append(calls, a.GetVerb()+" "+a.GetResource().Resource)
				}
				if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
					t.Errorf("API calls (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestNewestCurrentPod: during a rollback the newest pod is still one of the
// template rolled back from, stuck pulling its image; it says nothing of the
// template being rolled out, whose ReplicaSet has no pod yet.
func TestNewestCurrentPod(t *testing.T) {
	now := time.Now()
	template := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelWorkload: "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
		}
	}
	rsOf := func(name string, uid types.UID, image string) *appsv1.ReplicaSet {
		rs := controlledBy(replicaSet(name, "default", "web", uid), "Deployment", "dep-web")
		rs.Spec.Template = template(image)
		rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = name // the controller's hash label
		return rs
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"},
		Spec: appsv1.DeploymentSpec{Template: template("web:1")}}
	stuck := controlledBy(pod("web-bad-1", "default", "web", now, corev1.PodPending), "ReplicaSet", "rs-bad")
	objs := []k8sruntime.Object{dep, rsOf("web-one", "rs-one", "web:1"), rsOf("web-bad", "rs-bad", "web:bad"), stuck}
	ctx, id := context.Background(), mustID(t, "k8s-default|deployment|web")

	c := newFake(objs...)
	if got, err := New(c, "k8s").NewestPod(ctx, id, "dep-web", false); err != nil || got.Name != "web-bad-1" {
		t.Fatalf("NewestPod = %s, %v; want the stuck pod of the old template", podName(got), err)
	}
	if got, err := New(c, "k8s").NewestCurrentPod(ctx, id, "dep-web"); !errors.Is(err, ErrNoPod) {
		t.Errorf("NewestCurrentPod = %s, %v; want ErrNoPod: the current template has no pod yet", podName(got), err)
	}
	// The current template's pod is made: it is the one.
	c = newFake(append(objs, controlledBy(pod("web-one-2", "default", "web", now.Add(-time.Minute), corev1.PodPending), "ReplicaSet", "rs-one"))...)
	if got, err := New(c, "k8s").NewestCurrentPod(ctx, id, "dep-web"); err != nil || got.Name != "web-one-2" {
		t.Errorf("NewestCurrentPod = %s, %v; want web-one-2, older than the stuck pod but of the current template", podName(got), err)
	}
	// Another object of the same name now: no pod of the recorded one.
	if got, err := New(c, "k8s").NewestCurrentPod(ctx, id, "dep-older"); !errors.Is(err, ErrNoPod) {
		t.Errorf("NewestCurrentPod of an older UID = %s, %v; want ErrNoPod", podName(got), err)
	}
	// A job: the same as NewestPod.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "default", UID: "job-task"}}
	c = newFake(job, controlledBy(pod("task-1", "default", "task", now, corev1.PodPending), "Job", "job-task"))
	if got, err := New(c, "k8s").NewestCurrentPod(ctx, mustID(t, "k8s-default|job|task"), "job-task"); err != nil || got.Name != "task-1" {
		t.Errorf("NewestCurrentPod of a job = %s, %v; want task-1", podName(got), err)
	}
}

// podName is p's name, or "no pod".
func podName(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	return p.Name
}

func TestNewestPodListOptions(t *testing.T) {
	c := newFake()
	rt := New(c, "k8s")
	_, _ = rt.NewestPod(context.Background(), mustID(t, "k8s-ns|job|task"), "u1", false)
	_, _ = rt.NewestPod(context.Background(), mustID(t, "k8s-ns|deployment|web"), "u2", false)
	var got []string
	for _, a := range c.Actions() {
		got = append(got, a.GetResource().Resource+" "+a.(k8stesting.ListAction).GetListRestrictions().Labels.String())
	}
	want := []string{"pods batch.kubernetes.io/controller-uid=u1", "replicasets gobrave-workload=web"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("list selectors (-want +got):\n%s", diff)
	}
}

// addOwned adds a ReplicaSet of the deployment (or nothing for a job) and pods
// owned by it, as the controllers would.
func addOwned(t *testing.T, c *fake.Clientset, id runtimeid.ID, uid string, pods ...*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	owner, kind := types.UID(uid), "Job"
	if id.Kind == runtimeid.KindDeployment {
		owner, kind = types.UID("rs-"+uid), "ReplicaSet"
		rs := controlledBy(replicaSet(id.Name+"-rs", id.Namespace, id.Name, owner), "Deployment", types.UID(uid))
		if _, err := c.AppsV1().ReplicaSets(id.Namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if _, err := c.CoreV1().Pods(id.Namespace).Create(ctx, controlledBy(p, kind, owner), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInspect(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	// Look-alikes: newer, labelled web, owned by nothing.
	c := newFake(
		pod("lookalike-7", "default", "web", now.Add(time.Hour), corev1.PodRunning),
		pod("other-3", "default", "other", now.Add(time.Hour), corev1.PodRunning),
	)
	rt := New(c, "k8s")
	created, err := rt.Create(ctx, spec.ContainerSpec{Name: "web", Image: "nginx", ExposedPort: 80, ExposeService: true}, "default")
	if err != nil {
		t.Fatal(err)
	}
	addOwned(t, c, created.ID, created.UID,
		pod("web-1", "default", "web", now.Add(-time.Hour), corev1.PodRunning),
		pod("web-2", "default", "web", now, corev1.PodRunning))
	info, err := rt.Inspect(ctx, created.ID, created.UID)
	if err != nil {
		t.Fatal(err)
	}
	if info.PodName != "web-2" || info.NodeName != "node-web-2" || info.IPAddress != "web-svc.default.svc.cluster.local" ||
		!info.Ready || info.Restarts != 2 || info.Image != "img:web-2" || !info.Exists || info.UID != created.UID {
		t.Errorf("Inspect = %+v", info)
	}
	// A record without a UID: the pods of the object there now.
	if info, err := rt.Inspect(ctx, created.ID, ""); err != nil || info.PodName != "web-2" {
		t.Errorf("Inspect(no UID) = %+v, %v", info, err)
	}
	// A record of an older object: its pods are gone; not an error.
	if info, err := rt.Inspect(ctx, created.ID, "older"); err != nil || info.PodName != "" || !info.Exists {
		t.Errorf("Inspect(older UID) = %+v, %v", info, err)
	}
	// A job reports its pod's IP.
	c2 := newFake(pod("lookalike-8", "default", "task", now.Add(time.Hour), corev1.PodRunning))
	rt2 := New(c2, "k8s")
	job, err := rt2.Create(ctx, spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job"}, "default")
	if err != nil {
		t.Fatal(err)
	}
	addOwned(t, c2, job.ID, job.UID, pod("task-9", "default", "task", now, corev1.PodSucceeded))
	info, err = rt2.Inspect(ctx, job.ID, job.UID)
	if err != nil || info.IPAddress != "10.0.0.9" || info.PodPhase != "Succeeded" || info.PodName != "task-9" {
		t.Errorf("Inspect(job) = %+v, %v", info, err)
	}
	// Gone from the cluster: not an error, Exists false.
	info, err = rt2.Inspect(ctx, mustID(t, "k8s-default|job|gone"), "uid-gone")
	if err != nil || info.Exists {
		t.Errorf("Inspect(gone) = %+v, %v", info, err)
	}
}

func TestLogs(t *testing.T) {
	ctx := context.Background()
	id := mustID(t, "k8s-default|deployment|web")
	c := newFake(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}},
		pod("lookalike-2", "default", "web", time.Now().Add(time.Hour), corev1.PodRunning))
	addOwned(t, c, id, "dep-web", pod("web-1", "default", "web", time.Now(), corev1.PodRunning))
	var buf bytes.Buffer
	if err := New(c, "k8s").Logs(ctx, id, "dep-web", LogOptions{Tail: 5, Timestamps: true}, &buf); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "fake logs" {
		t.Errorf("logs = %q", buf.String())
	}
	var get k8stesting.GenericAction
	for _, a := range c.Actions() {
		if a.GetSubresource() == "log" {
			get = a.(k8stesting.GenericAction)
		}
	}
	if get == nil {
		t.Fatal("no pods/log request made")
	}
	opts := get.GetValue().(*corev1.PodLogOptions)
	if opts.TailLines == nil || *opts.TailLines != 5 || !opts.Timestamps {
		t.Errorf("log options = %+v", opts)
	}
	// The fake does not record which pod's logs were read; its error names the pod.
	c.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		return a.GetSubresource() == "log", nil, apierrors.NewServiceUnavailable("no logs")
	})
	err := New(c, "k8s").Logs(ctx, id, "dep-web", LogOptions{Tail: DefaultTail}, &buf)
	if err == nil || !contains(err.Error(), "(pod web-1)") {
		t.Errorf("Logs = %v, want the logs of web-1 (the look-alike is newer)", err)
	}
	err = New(c, "k8s").Logs(ctx, mustID(t, "k8s-default|deployment|nopods"), "", LogOptions{Tail: DefaultTail}, &buf)
	if !errors.Is(err, ErrNoPod) {
		t.Errorf("Logs(no pods) = %v, want ErrNoPod", err)
	}
}

// TestDeploymentRestart: restart sets the template's restartedAt annotation
// (a new rollout) and scales to 1; a deployment of another UID is left
// alone; pause is stop.
func TestDeploymentRestart(t *testing.T) {
	ctx := context.Background()
	id := runtimeid.ID{Runtime: "k8s", Namespace: "ns", Kind: runtimeid.KindDeployment, Name: "web"}
	k := deploymentKind{}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0))}}
	if _, err := k.PlanRestart(id, nil); !errors.Is(err, ErrGone) {
		t.Fatalf("PlanRestart of no deployment = %v, want ErrGone", err)
	}
	plan, err := k.PlanRestart(id, d)
	if err != nil || !plan.Restart || plan.UID != "u1" {
		t.Fatalf("PlanRestart = %+v, %v", plan, err)
	}
	c := fake.NewClientset(d.DeepCopy())
	if _, err := k.Start(ctx, c, id, plan, nil); err != nil {
		t.Fatal(err)
	}
	got, err := c.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := got.Spec.Template.Annotations[RestartedAtAnnotation]
	if first == "" || *got.Spec.Replicas != 1 {
		t.Fatalf("after restart: annotations %v replicas %d; want %s set, 1 replica", got.Spec.Template.Annotations, *got.Spec.Replicas, RestartedAtAnnotation)
	}
	if _, err := k.Start(ctx, c, id, plan, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = c.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
	if got.Spec.Template.Annotations[RestartedAtAnnotation] == first {
		t.Error("a second restart did not change the template: no new rollout")
	}
	other := plan
	other.UID = "u0"
	if _, err := k.Start(ctx, c, id, other, nil); !errors.Is(err, ErrGone) {
		t.Fatalf("restart of another deployment = %v, want ErrGone", err)
	}
	if k.PauseExpect() != k.StopExpect() {
		t.Error("a deployment's pause does not end as its stop")
	}
}
