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

// TestJobPauseResume: pause suspends the job (spec.suspend) and keeps it;
// start of a suspended job unsuspends the same job; a finished job or one
// being deleted is not paused, with an error saying why.
func TestJobPauseResume(t *testing.T) {
	ctx := context.Background()
	id := runtimeid.ID{Runtime: "k8s", Namespace: "ns", Kind: runtimeid.KindJob, Name: "task"}
	k := jobKind{}
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u1"}, Spec: batchv1.JobSpec{Suspend: ptr(false)}}

	c := fake.NewClientset(running.DeepCopy())
	found, err := k.Pause(ctx, c, id, "")
	if err != nil || !found {
		t.Fatalf("Pause = %v, %v; want found", found, err)
	}
	j, err := c.BatchV1().Jobs("ns").Get(ctx, "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.UID != "u1" || j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Fatalf("after pause: uid %s suspend %v; want u1 suspended", j.UID, j.Spec.Suspend)
	}
	// Paused again: nothing to change, no error.
	if found, err := k.Pause(ctx, c, id, ""); err != nil || !found {
		t.Fatalf("second Pause = %v, %v", found, err)
	}

	plan, err := k.PlanStart(id, j)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Unsuspend || plan.Replace || plan.UID != "u1" {
		t.Fatalf("PlanStart of a suspended job = %+v, want Unsuspend of u1", plan)
	}
	res, err := k.Start(ctx, c, id, plan, nil)
	if err != nil || res.UID != "u1" || res.Recreated {
		t.Fatalf("Start = %+v, %v; want u1 unsuspended, not recreated", res, err)
	}
	if j, _ = c.BatchV1().Jobs("ns").Get(ctx, "task", metav1.GetOptions{}); *j.Spec.Suspend {
		t.Fatal("start left the job suspended")
	}

	// Unsuspend names its job: another one of the name is left alone.
	other := plan
	other.UID = "u0"
	if _, err := k.Start(ctx, c, id, other, nil); err == nil || !strings.Contains(err.Error(), "another job") {
		t.Fatalf("Start of another job's plan = %v, want an error", err)
	}

	now := metav1.Now()
	for _, tt := range []struct {
		name    string
		job     *batchv1.Job
		wantErr string
	}{
		{"finished", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u2"},
			Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "True"}}}}, "the job has finished"},
		{"being deleted", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u3", DeletionTimestamp: &now,
			Finalizers: []string{"x"}}}, "being deleted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(tt.job)
			if _, err := k.Pause(ctx, c, id, ""); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Pause = %v, want an error containing %q", err, tt.wantErr)
			}
			if j, _ := c.BatchV1().Jobs("ns").Get(ctx, "task", metav1.GetOptions{}); j.Spec.Suspend != nil {
				t.Errorf("the job was changed: suspend %v", *j.Spec.Suspend)
			}
		})
	}
	t.Run("gone", func(t *testing.T) {
		if found, err := k.Pause(ctx, fake.NewClientset(), id, ""); found || err != nil {
			t.Fatalf("Pause of no job = %v, %v; want not found, no error", found, err)
		}
	})
}

// TestJobRestart: restart replaces the job whatever its state, from the
// recorded spec, through the replacing start.
func TestJobRestart(t *testing.T) {
	ctx := context.Background()
	id := runtimeid.ID{Runtime: "k8s", Namespace: "ns", Kind: runtimeid.KindJob, Name: "task"}
	k := jobKind{}
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u1"}}
	plan, err := k.PlanRestart(id, running)
	if err != nil || !plan.Replace || plan.UID != "u1" {
		t.Fatalf("PlanRestart of a running job = %+v, %v; want Replace of u1", plan, err)
	}
	if plan, err = k.PlanRestart(id, nil); err != nil || !plan.Replace || plan.UID != "" {
		t.Fatalf("PlanRestart of no job = %+v, %v; want Replace", plan, err)
	}
	c := fake.NewClientset(running.DeepCopy())
	plan, _ = k.PlanRestart(id, running)
	s := spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: runtimeid.KindJob}
	res, err := k.Start(ctx, c, id, plan, &s)
	if err != nil || !res.Recreated {
		t.Fatalf("Start = %+v, %v; want a new job", res, err)
	}
	var deleted bool
	for _, a := range c.Actions() {
		deleted = deleted || a.GetVerb() == "delete"
	}
	if !deleted {
		t.Error("the running job was not deleted before the new run")
	}
}
