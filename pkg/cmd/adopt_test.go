package cmd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// A colleague's workloads, made with the same builder the plugin uses,
// are imported with their current state and spec.
func TestAdopt(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	c := h.clusters[""]
	web, err := runtime.Build(spec.ContainerSpec{Name: "web", Image: "nginx:1.27", ExposedPort: 80}, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	web.Deployment.UID = "uid-web"
	web.Deployment.Status.ReadyReplicas, web.Deployment.Status.Replicas = 1, 1
	if _, err := c.AppsV1().Deployments("team-a").Create(ctx, web.Deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	task, err := runtime.Build(spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job", Command: []string{"echo", "hi"}}, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	task.Job.UID = "uid-task"
	task.Job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := c.BatchV1().Jobs("team-a").Create(ctx, task.Job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not ours: no gobrave-workload label.
	if _, err := c.BatchV1().Jobs("team-a").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	out := h.ok("adopt", "-n", "team-a")
	want := "deployment.apps/web adopted (k8s-team-a|deployment|web, running)\njob.batch/task adopted (k8s-team-a|job|task, exited)\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("adopt output (-want +got):\n%s", diff)
	}
	if got := h.state("k8s-team-a|deployment|web"); got != "running" {
		t.Errorf("web state %q", got)
	}
	w := h.workload("k8s-team-a|job|task")
	if w.State != "exited" || w.UID != "uid-task" || strings.Join(w.Spec.Command, " ") != "echo hi" {
		t.Errorf("task record = %+v", w)
	}
	if got := h.history("k8s-team-a|job|task"); len(got) != 1 || !strings.HasPrefix(got[0], "Adopted") {
		t.Errorf("task history = %v", got)
	}
	// A second adopt knows them already.
	r := h.run("adopt", "-n", "team-a")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "adopted 0, already known 2") {
		t.Errorf("second adopt: %v", r)
	}
	// The recorded spec lets a stopped job run again.
	h.ok("stop", "k8s-team-a|job|task")
	h.ok("start", "k8s-team-a|job|task")
	if _, err := h.job("", "team-a", "task"); err != nil {
		t.Errorf("job not re-created from the adopted spec: %v", err)
	}
}
