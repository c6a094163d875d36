package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// An update of a service records SpecUpdated with its revision before the
// Deployment is sent the new template and spec annotation; it rolls out
// (starting), and the same spec again is no change.
func TestUpdateService(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() == "" {
			r, _ := e.Store.Get(ctx, w.RuntimeID)
			seen = append(seen, string(r.Request)+"/"+r.Spec.Image)
		}
		return false, nil, nil
	})
	next := w.Spec
	next.Image = "nginx:1.28"
	res, err := e.Update(ctx, w, next, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"SpecUpdated/nginx:1.28"}, seen); diff != "" {
		t.Errorf("record when the deployment was updated (-want +got):\n%s", diff)
	}
	if !res.Rollout || res.Workload.State != store.StateStarting || res.Revision.Revision != 2 || res.Change != "image nginx:1.27 → nginx:1.28" {
		t.Errorf("result %+v", res)
	}
	d, err := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.28" {
		t.Errorf("deployment image %q", got)
	}
	if !strings.Contains(d.Annotations[runtime.AnnotationSpec], `"image":"nginx:1.28"`) {
		t.Errorf("spec annotation %q", d.Annotations[runtime.AnnotationSpec])
	}
	if diffs, err := runtime.TemplateDiff(next, d.Spec.Template); err != nil || len(diffs) > 0 {
		t.Errorf("template and spec differ: %v %v", diffs, err)
	}
	if _, err := e.Update(ctx, res.Workload, next, ""); !errors.Is(err, ErrNoChange) {
		t.Errorf("the same spec again: %v, want ErrNoChange", err)
	}
	if diff := cmp.Diff([]string{"Created", "SpecUpdated"}, history(t, e.Store, w.RuntimeID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}

	// The name, kind and port are not the update's to change.
	bad := next
	bad.ExposedPort = 80
	if _, err := e.Update(ctx, res.Workload, bad, ""); !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("a port change: %v, want ErrInvalid", err)
	}
	bad = next
	bad.Image = ""
	if _, err := e.Update(ctx, res.Workload, bad, ""); !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("no image: %v, want ErrInvalid", err)
	}
}

// A refused update leaves the record's spec and revisions as they were.
func TestUpdateRefusedIsTakenBack(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no"))
		}
		return false, nil, nil
	})
	next := w.Spec
	next.Image = "nginx:1.28"
	res, err := e.Update(ctx, w, next, "")
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("Update = %v, want forbidden", err)
	}
	if res.Workload.Spec.Image != "nginx:1.27" || res.Workload.State != store.StateCreated || res.Workload.Request != store.Created {
		t.Errorf("record after a refused update: %s %s %s", res.Workload.Spec.Image, res.Workload.State, res.Workload.Request)
	}
	revs, err := e.Store.Revisions(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 1 || revs[0].Spec.Image != "nginx:1.27" {
		t.Errorf("revisions after a refused update: %+v", revs)
	}
	if diff := cmp.Diff([]string{"Created", "SpecUpdated", "RequestFailed"}, history(t, e.Store, w.RuntimeID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// A job's update changes only the record: the job runs on, and its next
// run is made from the new spec.
func TestUpdateJob(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	task := spec.ContainerSpec{Name: "task", Image: "busybox:1.36", WorkloadKind: "job"}
	w, _, err := e.Create(ctx, "k8s", "default", task)
	if err != nil {
		t.Fatal(err)
	}
	next := w.Spec
	next.Env = map[string]string{"MODE": "full"}
	res, err := e.Update(ctx, w, next, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Rollout || res.Workload.State != store.StateCreated || res.Workload.Request != store.Created || res.Change != "env +MODE" {
		t.Errorf("job after an update: %+v %q", res.Workload, res.Change)
	}
	j, err := c.BatchV1().Jobs("default").Get(ctx, "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Spec.Template.Spec.Containers[0].Env) != 0 {
		t.Errorf("the running job was changed: %v", j.Spec.Template.Spec.Containers[0].Env)
	}
	// Its next run: a restart makes the job again from the record.
	if _, err := e.Apply(ctx, res.Workload, store.RestartRequested); err != nil {
		t.Fatal(err)
	}
	j, err = c.BatchV1().Jobs("default").Get(ctx, "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if env := j.Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != "full" {
		t.Errorf("the next run's env %v, want MODE=full", env)
	}
}

func TestChange(t *testing.T) {
	old := spec.ContainerSpec{Name: "w", Image: "a:1", Env: map[string]string{"A": "1", "B": "2"}, CPU: 0.5, Labels: map[string]string{"team": "x"}}
	next := spec.ContainerSpec{Name: "w", Image: "a:2", Env: map[string]string{"B": "3", "C": "4"}, CPU: 1, Memory: "256Mi", Entrypoint: []string{"sh", "-c"}}
	want := "image a:1 → a:2; entrypoint <none> → [sh -c]; env -A, ~B, +C; cpu 0.5 → 1; memory <none> → 256Mi; labels -team"
	if got := Change(old, next); got != want {
		t.Errorf("Change =\n%s\nwant\n%s", got, want)
	}
	if got := Change(old, old); got != "no change" {
		t.Errorf("Change of the same = %q", got)
	}
}

// An adopted record's spec may lack the namespace and the defaults: the
// same spec with them is no change.
func TestUpdateAdoptedSpecNoChange(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	bare := w
	bare.Spec.RuntimeNamespace, bare.Spec.PullPolicy, bare.Spec.WorkloadKind = "", "", ""
	if err := e.Store.PutAdopted(ctx, bare, store.Transition{Type: store.Adopted, UID: w.UID}, true); err != nil {
		t.Fatal(err)
	}
	bare, _ = e.Store.Get(ctx, w.RuntimeID)
	next := bare.Spec
	if _, err := e.Update(ctx, bare, next, ""); !errors.Is(err, ErrNoChange) {
		t.Errorf("the same spec of an adopted record: %v, want ErrNoChange", err)
	}
}
