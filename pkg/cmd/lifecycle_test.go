package cmd_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	webID  = "k8s-default|deployment|web"
	taskID = "k8s-default|job|task"
)

// seedWebTask creates the service web (with web-svc) and the task task.
func seedWebTask(t *testing.T, h *harness) {
	t.Helper()
	h.ok("create", "web", "--image", "nginx:1.27", "--port", "80", "--expose")
	h.ok("create", "task", "--kind", "job", "--image", "busybox", "--", "echo", "hi")
	h.clearActions()
}

func replicas(t *testing.T, h *harness, ctxName, ns, name string) int32 {
	t.Helper()
	d, err := h.deployment(ctxName, ns, name)
	if err != nil {
		t.Fatalf("deployment %s/%s: %v", ns, name, err)
	}
	return *d.Spec.Replicas
}

func TestLifecycleDeployment(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	steps := []struct {
		args         []string
		wantOut      string
		wantReplicas int32
		wantState    string
		wantEvent    string
	}{
		// The fake cluster has no controllers: the status of a deployment
		// scaled to 0 says no replicas at once, so the engine's read after
		// the action confirms the exit; a start waits for a ready replica.
		{[]string{"stop", "web"}, "deployment.apps/web stopped (" + webID + ")\n", 0, "exited", "StopRequested: scale to 0"},
		{[]string{"start", "web"}, "deployment.apps/web started (" + webID + ")\n", 1, "starting", "StartRequested: scale to 1"},
		{[]string{"pause", webID}, "deployment.apps/web paused (" + webID + ")\n", 0, "exited", "PauseRequested: scale to 0"},
		{[]string{"resume", "deployment/web"}, "deployment.apps/web resumed (" + webID + ")\n", 1, "starting", "ResumeRequested: scale to 1"},
	}
	wantHistory := []string{"Created: create deployment.apps/web, service/web-svc"}
	for _, s := range steps {
		r := h.run(s.args...)
		checkExit(t, r, 0, "")
		if diff := cmp.Diff(s.wantOut, r.stdout); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
		if got := replicas(t, h, "", "default", "web"); got != s.wantReplicas {
			t.Errorf("%v: replicas %d, want %d", s.args, got, s.wantReplicas)
		}
		if got := h.state(webID); got != s.wantState {
			t.Errorf("%v: state %q, want %q", s.args, got, s.wantState)
		}
		wantHistory = append(wantHistory, s.wantEvent)
		if s.wantState == "exited" {
			wantHistory = append(wantHistory, "ContainerExited: 0")
		}
	}
	if diff := cmp.Diff(wantHistory, h.history(webID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// The deployment's UID is recorded on every event.
	d, _ := h.deployment("", "default", "web")
	for _, e := range h.events(webID) {
		if e.UID != string(d.UID) {
			t.Errorf("event %s has UID %q, want %q", e.Type, e.UID, d.UID)
		}
	}

	// delete removes the service and the deployment; the record stays.
	r := h.run("rm", "web")
	checkExit(t, r, 0, "")
	if diff := cmp.Diff("deployment.apps/web deleted ("+webID+")\n", r.stdout); diff != "" {
		t.Errorf("delete: stdout (-want +got):\n%s", diff)
	}
	if _, err := h.deployment("", "default", "web"); err == nil {
		t.Error("deployment web still exists")
	}
	if _, err := h.service("", "default", "web-svc"); err == nil {
		t.Error("service web-svc still exists")
	}
	if got := h.state(webID); got != "deleted" {
		t.Errorf("state %q, want deleted", got)
	}
	// The read after the delete finds it gone and records that at once.
	if got := h.history(webID); !slices.Equal(got[len(got)-2:], []string{"DeleteRequested: delete", "ContainerDeleted: "}) {
		t.Errorf("last events %q, want DeleteRequested: delete, ContainerDeleted", got[len(got)-2:])
	}
	// A deleted workload cannot be stopped.
	r = h.run("stop", "web")
	checkExit(t, r, 1, "it was deleted")
}

func TestLifecycleJob(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	first, err := h.job("", "default", "task")
	if err != nil {
		t.Fatal(err)
	}

	r := h.run("start", "job/task")
	checkExit(t, r, 0, "")
	if diff := cmp.Diff("job.batch/task started ("+taskID+")\n", r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}

	r = h.run("stop", "task")
	checkExit(t, r, 0, "")
	if diff := cmp.Diff("job.batch/task stopped ("+taskID+")\n", r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if _, err := h.job("", "default", "task"); err == nil {
		t.Error("stop left the job in the cluster")
	}
	// Stopping again finds it gone: not an error.
	checkExit(t, h.run("stop", "task"), 0, "")

	// start creates it again from the recorded spec, with a new UID.
	checkExit(t, h.run("start", taskID), 0, "")
	again, err := h.job("", "default", "task")
	if err != nil {
		t.Fatalf("start did not create the job again: %v", err)
	}
	if again.UID == first.UID {
		t.Errorf("the job has its old UID %s", again.UID)
	}
	if diff := cmp.Diff([]string{"echo", "hi"}, again.Spec.Template.Spec.Containers[0].Args); diff != "" {
		t.Errorf("args of the job created again (-want +got):\n%s", diff)
	}
	want := []string{
		"Created: create job.batch/task",
		"StartRequested: the job is running: leave it alone",
		"StopRequested: delete the job (foreground)",
		"ContainerDeleted: stopped",
		// A second stop is a request of its own, confirmed at once.
		"StopRequested: delete the job (foreground)",
		"ContainerDeleted: stopped",
		"StartRequested: create the job again from the recorded spec",
	}
	if diff := cmp.Diff(want, h.history(taskID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if got := h.workload(taskID).UID; got != string(again.UID) {
		t.Errorf("recorded UID %q, want the new job's %q", got, again.UID)
	}
	if got := h.state(taskID); got != "starting" {
		t.Errorf("state %q, want starting", got)
	}
}

func TestLifecycleSeveralIDs(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	r := h.run("stop", "web", "job/task", webID) // web twice: once
	checkExit(t, r, 0, "")
	want := "deployment.apps/web stopped (" + webID + ")\njob.batch/task stopped (" + taskID + ")\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	for _, id := range []string{webID, taskID} {
		if got := h.state(id); got != "exited" {
			t.Errorf("%s: state %q, want exited (confirmed by the read after the stop)", id, got)
		}
	}
	if got := slices.Index(h.history(webID), "StopRequested: scale to 0"); got != 1 || slices.Contains(h.history(webID)[2:], "StopRequested: scale to 0") {
		t.Errorf("web history %q, want one StopRequested", h.history(webID))
	}
}

// TestLifecycleOneBadAmongGood: one ID that fails does not stop the others;
// the command exits 1 naming the bad one.
func TestLifecycleOneBadAmongGood(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, h *harness)
		args    []string
		wantOut string
		wantErr string
	}{
		{
			name: "workload gone from the cluster",
			prepare: func(t *testing.T, h *harness) {
				h.ok("create", "gone", "--image", "nginx:1.27")
				if err := h.clusters[""].AppsV1().Deployments("default").Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			args:    []string{"stop", "web", "gone", "task"},
			wantOut: "deployment.apps/web stopped (" + webID + ")\njob.batch/task stopped (" + taskID + ")\n",
			wantErr: "k8s-default|deployment|gone: the deployment no longer exists in the cluster",
		},
		{
			name:    "ID not in the database",
			args:    []string{"stop", "web", "nosuch", "task"},
			wantOut: "deployment.apps/web stopped (" + webID + ")\njob.batch/task stopped (" + taskID + ")\n",
			wantErr: `no workload named "nosuch"`,
		},
		{
			name:    "full ID not in the database",
			args:    []string{"stop", "web", "k8s-other|job|task", "task"},
			wantOut: "deployment.apps/web stopped (" + webID + ")\njob.batch/task stopped (" + taskID + ")\n",
			wantErr: "k8s-other|job|task is not in the state database",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			seedWebTask(t, h)
			if tt.prepare != nil {
				tt.prepare(t, h)
			}
			r := h.run(tt.args...)
			checkExit(t, r, 1, tt.wantErr)
			if strings.Contains(r.msg, "\n") {
				t.Errorf("error is not one line: %q", r.msg)
			}
			if diff := cmp.Diff(tt.wantOut, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if got := replicas(t, h, "", "default", "web"); got != 0 {
				t.Errorf("web has %d replicas, want 0", got)
			}
			if _, err := h.job("", "default", "task"); err == nil {
				t.Error("task was not stopped")
			}
			for _, id := range []string{webID, taskID} {
				if got := h.state(id); got != "exited" {
					t.Errorf("%s: state %q, want exited", id, got)
				}
			}
		})
	}
}

func TestIDForms(t *testing.T) {
	h := newHarness(t)
	h.configPath = "testdata/config-k3s.yaml"
	// k8s profile namespace team-a, k3s profile context k3s-ctx namespace ai.
	h.ok("create", "web", "--image", "nginx:1.27")
	h.ok("create", "task", "--kind", "job", "--image", "busybox")
	h.ok("create", "api", "--image", "nginx:1.27", "-n", "team-b")
	h.ok("create", "web", "--image", "nginx:1.27", "--runtime", "k3s")
	tests := []struct {
		args   []string
		wantID string
	}{
		{[]string{"k8s-team-a|deployment|web"}, "k8s-team-a|deployment|web"},
		{[]string{"k3s-ai|deployment|web"}, "k3s-ai|deployment|web"},
		{[]string{"deployment/web"}, "k8s-team-a|deployment|web"},
		{[]string{"deploy/web"}, "k8s-team-a|deployment|web"},
		{[]string{"deployments/web"}, "k8s-team-a|deployment|web"},
		{[]string{"deployment.apps/web"}, "k8s-team-a|deployment|web"},
		{[]string{"deployment/web", "--runtime", "k3s"}, "k3s-ai|deployment|web"},
		{[]string{"job/task"}, "k8s-team-a|job|task"},
		{[]string{"jobs/task"}, "k8s-team-a|job|task"},
		{[]string{"job.batch/task"}, "k8s-team-a|job|task"},
		{[]string{"deployment/api", "-n", "team-b"}, "k8s-team-b|deployment|api"},
		{[]string{"task"}, "k8s-team-a|job|task"},
		{[]string{"api"}, "k8s-team-b|deployment|api"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			evs := h.events(tt.args...)
			if len(evs) == 0 {
				t.Fatal("no events")
			}
			if evs[0].RuntimeID != tt.wantID {
				t.Errorf("resolved to %s, want %s", evs[0].RuntimeID, tt.wantID)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		for _, args := range [][]string{{"deployment/task"}, {"job/web"}, {"deployment/api"}, {"nosuch"}} {
			r := h.run(append([]string{"inspect"}, args...)...)
			checkExit(t, r, 1, "state database")
			if !strings.Contains(r.msg, "ps -a") {
				t.Errorf("%v: %q does not say what to do next", args, r.msg)
			}
		}
	})

	t.Run("bare NAME of two records", func(t *testing.T) {
		h.clearActions()
		before, _ := h.snapshot()
		for _, verb := range []string{"stop", "inspect", "logs", "events", "delete"} {
			r := h.run(verb, "web")
			checkExit(t, r, 2, `"web" matches 2 workloads: k3s-ai|deployment|web, k8s-team-a|deployment|web (pass the full runtime ID)`)
		}
		after, _ := h.snapshot()
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("database changed (-before +after):\n%s", diff)
		}
		if n := h.actions(); n != 0 {
			t.Errorf("%d API requests: %s", n, h.describeActions())
		}
	})

	t.Run("lifecycle on the k3s context", func(t *testing.T) {
		h.clearActions()
		r := h.run("stop", "deployment/web", "--runtime", "k3s")
		checkExit(t, r, 0, "")
		if diff := cmp.Diff("deployment.apps/web stopped (k3s-ai|deployment|web)\n", r.stdout); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
		if n := len(h.clusters[""].Actions()); n != 0 {
			t.Errorf("the current context got %d requests, want none: %s", n, h.describeActions())
		}
		if got := replicas(t, h, k3sContext, "ai", "web"); got != 0 {
			t.Errorf("k3s web: %d replicas, want 0", got)
		}
		if got := replicas(t, h, "", "team-a", "web"); got != 1 {
			t.Errorf("k8s web: %d replicas, want 1 (untouched)", got)
		}
	})
}

// TestLifecyclePauseJob: pause suspends the job and keeps it; --wait ends
// when the job controller has suspended it (paused); resume unsuspends the
// same job.
func TestLifecyclePauseJob(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	first, err := h.job("", "default", "task")
	if err != nil {
		t.Fatal(err)
	}
	ch := h.runAsync(t.Context(), "pause", "job/task", "--wait", "--timeout=30s")
	eventually(t, "the job suspended", func() bool {
		j, err := h.job("", "default", "task")
		return err == nil && j.Spec.Suspend != nil && *j.Spec.Suspend
	})
	eventually(t, "the monitor's watch of jobs", func() bool { return h.clusters[""].watching("jobs") })
	// The job controller's part: the pods go, the Suspended condition.
	setJobStatus(t, h, "default", "task", batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", Message: "Job suspended"}}})
	r := await(t, ch)
	checkExit(t, r, 0, "")
	if diff := cmp.Diff("job.batch/task paused ("+taskID+")\n", r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if got := h.state(taskID); got != "paused" {
		t.Errorf("state %q, want paused", got)
	}
	j, err := h.job("", "default", "task")
	if err != nil || j.UID != first.UID {
		t.Fatalf("pause did not keep the job: %v", err)
	}

	checkExit(t, h.run("resume", "task"), 0, "")
	j, _ = h.job("", "default", "task")
	if j.UID != first.UID || *j.Spec.Suspend {
		t.Errorf("resume: job uid %s suspend %v; want %s unsuspended", j.UID, *j.Spec.Suspend, first.UID)
	}
	want := []string{
		"Created: create job.batch/task",
		"PauseRequested: suspend the job (its pods are removed, the job and its completions kept)",
		"ContainerPaused: suspended",
		"ResumeRequested: unsuspend the job (its completions are kept)",
	}
	if diff := cmp.Diff(want, h.history(taskID)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if got := h.state(taskID); got != "starting" {
		t.Errorf("state %q, want starting", got)
	}
}

// TestLifecycleRestart: restart of a job makes a new one from the recorded
// spec; of a deployment, a rollout restart that scales it to 1.
func TestLifecycleRestart(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	first, _ := h.job("", "default", "task")
	setJobStatus(t, h, "default", "task", jobComplete)
	r := h.run("restart", "task", "web")
	checkExit(t, r, 0, "")
	if diff := cmp.Diff("job.batch/task restarted ("+taskID+")\ndeployment.apps/web restarted ("+webID+")\n", r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	again, err := h.job("", "default", "task")
	if err != nil || again.UID == first.UID {
		t.Fatalf("restart did not run the job anew: %v", err)
	}
	if got := h.workload(taskID).UID; got != string(again.UID) {
		t.Errorf("recorded UID %q, want the new job's %q", got, again.UID)
	}
	d, err := h.deployment("", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" || *d.Spec.Replicas != 1 {
		t.Errorf("deployment after restart: annotations %v replicas %d", d.Spec.Template.Annotations, *d.Spec.Replicas)
	}
	for id, want := range map[string]string{
		taskID: "RestartRequested: delete the job and run it again from the recorded spec",
		webID:  "RestartRequested: rollout restart (new pods from the same template), scale to 1",
	} {
		hist := h.history(id)
		if got := hist[len(hist)-1]; got != want {
			t.Errorf("%s: last event %q, want %q", id, got, want)
		}
		if got := h.state(id); got != "starting" {
			t.Errorf("%s: state %q, want starting", id, got)
		}
	}
}
