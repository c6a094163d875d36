package runtime

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// TestJobStartWaitsForTheOldJobBounded: a start of a job whose previous job
// is held by a finalizer gives up after JobGoneTimeout and names it; one
// whose previous job goes away creates the new one.
func TestJobStartWaitsForTheOldJobBounded(t *testing.T) {
	id := runtimeid.ID{Runtime: "k8s", Namespace: "ns", Kind: runtimeid.KindJob, Name: "task"}
	now := metav1.Now()
	old := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "old",
		DeletionTimestamp: &now, Finalizers: []string{"example.com/hold"}}}
	s := spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: runtimeid.KindJob}

	t.Run("held", func(t *testing.T) {
		c := fake.NewClientset(old.DeepCopy())
		// A finalizer keeps the object: deletes change nothing.
		c.PrependReactor("delete", "jobs", func(k8stesting.Action) (bool, k8sruntime.Object, error) { return true, nil, nil })
		defer func(d time.Duration) { JobGoneTimeout = d }(JobGoneTimeout)
		JobGoneTimeout = 300 * time.Millisecond
		k := jobKind{}
		plan, err := k.PlanStart(id, old)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Replace || plan.UID != "old" {
			t.Fatalf("plan %+v, want Replace of old", plan)
		}
		_, err = k.Start(context.Background(), c, id, plan, &s)
		if err == nil || !strings.Contains(err.Error(), "still being deleted") || !strings.Contains(err.Error(), "example.com/hold") {
			t.Fatalf("Start = %v, want an error naming the finalizer", err)
		}
		if j, _ := c.BatchV1().Jobs("ns").Get(context.Background(), "task", metav1.GetOptions{}); j.UID != "old" {
			t.Errorf("a job was created over the old one: uid %s", j.UID)
		}
	})
	t.Run("goes away", func(t *testing.T) {
		c := fake.NewClientset(old.DeepCopy())
		k := jobKind{}
		plan, err := k.PlanStart(id, old)
		if err != nil {
			t.Fatal(err)
		}
		res, err := k.Start(context.Background(), c, id, plan, &s)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Recreated {
			t.Errorf("Start = %+v, want the job created again", res)
		}
	})
	t.Run("gone is created again", func(t *testing.T) {
		plan, err := jobKind{}.PlanStart(id, nil)
		if err != nil || !plan.Replace || plan.UID != "" {
			t.Errorf("plan %+v, %v; want Replace with no UID", plan, err)
		}
	})
	t.Run("running is left alone", func(t *testing.T) {
		plan, err := jobKind{}.PlanStart(id, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "run"}})
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Leave || plan.Replace || plan.UID != "run" {
			t.Errorf("plan %+v, want Leave of run", plan)
		}
	})
}

// A recorded spec is checked before a start re-creates the job from it: a
// record adopted from a planted annotation before adopt checked it (the
// node's / mounted) is refused, and the finished job is left alone.
func TestJobStartRefusesAnUnsafeRecordedSpec(t *testing.T) {
	id := runtimeid.ID{Runtime: "k8s", Namespace: "ns", Kind: runtimeid.KindJob, Name: "task"}
	done := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "old"},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "True"}}}}
	c := fake.NewClientset(done.DeepCopy())
	s := spec.ContainerSpec{Name: "task", Image: "evil:1", WorkloadKind: runtimeid.KindJob, Volumes: []spec.Volume{{Source: "/", Target: "/host"}}, User: "0"}
	k := jobKind{}
	plan, err := k.PlanStart(id, done)
	if err != nil || !plan.Replace {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	_, err = k.Start(context.Background(), c, id, plan, &s)
	if err == nil || !strings.Contains(err.Error(), `the recorded spec is refused, nothing was changed (volumes[0].source "/": refused`) {
		t.Fatalf("Start = %v, want the recorded spec refused", err)
	}
	if j, err := c.BatchV1().Jobs("ns").Get(context.Background(), "task", metav1.GetOptions{}); err != nil || j.UID != "old" {
		t.Errorf("the finished job was replaced: %v, %v", j, err)
	}
	for _, a := range c.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("a refused start made a %s of %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
