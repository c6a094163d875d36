package cmd_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// setJobStatus sets the status of a job in the fake cluster, as the job
// controller would.
func setJobStatus(t *testing.T, h *harness, ns, name string, st batchv1.JobStatus) {
	t.Helper()
	j, err := h.job("", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	j.Status = st
	if _, err := h.clusters[""].BatchV1().Jobs(ns).UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var (
	jobComplete = batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	jobFailed   = batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}
)

func eventTypes(evs []eventView) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestWaitForExited(t *testing.T) {
	tests := []struct {
		name string
		// before: the job completes before wait starts (the informer's list
		// sees it); otherwise while wait watches.
		before bool
	}{
		{"completes while waiting", false},
		{"already complete", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			seedWebTask(t, h)
			if tt.before {
				setJobStatus(t, h, "default", "task", jobComplete)
			}
			ch := h.runAsync(t.Context(), "wait", "job/task", "--for=exited", "--timeout=30s")
			if !tt.before {
				eventually(t, "the monitor's watch of jobs", func() bool { return h.clusters[""].watching("jobs") })
				setJobStatus(t, h, "default", "task", jobComplete)
			}
			r := await(t, ch)
			checkExit(t, r, 0, "")
			if diff := cmp.Diff("job.batch/task condition met (exited)\n", r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if got := h.state(taskID); got != "exited" {
				t.Errorf("state %q, want exited", got)
			}
			evs := h.events(taskID)
			if diff := cmp.Diff([]string{"Created", "ContainerExited"}, eventTypes(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			j, _ := h.job("", "default", "task")
			if last := evs[len(evs)-1]; last.Message != "0" || last.UID != string(j.UID) {
				t.Errorf("ContainerExited message %q uid %q, want 0 and %s", last.Message, last.UID, j.UID)
			}
			// web, not waited for, is untouched.
			if got := h.state(webID); got != "created" {
				t.Errorf("web: state %q, want created", got)
			}
		})
	}
}

func TestWaitImpossible(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	setJobStatus(t, h, "default", "task", jobFailed)
	r := await(t, h.runAsync(t.Context(), "wait", "task", "--for=exited", "--timeout=30s"))
	checkExit(t, r, 1, "wait for exited: "+taskID+" is failed (BackoffLimitExceeded: Job has reached the specified backoff limit)")
	if r.stdout != "" {
		t.Errorf("stdout %q", r.stdout)
	}
}

func TestWaitTimeout(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	r := await(t, h.runAsync(t.Context(), "wait", "web", "task", "--for=exited", "--timeout=500ms"))
	checkExit(t, r, 1, "timed out after 500ms waiting for exited: "+webID+" (created), "+taskID+" (created)")
	if strings.Contains(r.msg, "\n") {
		t.Errorf("error is not one line: %q", r.msg)
	}
	// "timed out" is said only when the context's deadline has passed (waitfor.go checks
	// context.DeadlineExceeded), so the message is the proof it did not return early.
	if r.stdout != "" {
		t.Errorf("stdout %q", r.stdout)
	}
	for _, id := range []string{webID, taskID} {
		if got := h.state(id); got != "created" {
			t.Errorf("%s: state %q, want created", id, got)
		}
	}
}

func TestStopWait(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	// A deployment scaled to 0 with no replica left has exited.
	r := await(t, h.runAsync(t.Context(), "stop", "web", "--wait", "--timeout=30s"))
	checkExit(t, r, 0, "")
	if diff := cmp.Diff("deployment.apps/web stopped ("+webID+")\n", r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if got := h.state(webID); got != "exited" {
		t.Errorf("state %q, want exited", got)
	}
	if diff := cmp.Diff([]string{"Created", "StopRequested", "ContainerExited"}, eventTypes(h.events(webID))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestDeleteWait(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	r := await(t, h.runAsync(t.Context(), "delete", "web", "task", "--wait", "--timeout=30s"))
	checkExit(t, r, 0, "")
	want := "deployment.apps/web deleted (" + webID + ")\njob.batch/task deleted (" + taskID + ")\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	for _, id := range []string{webID, taskID} {
		if diff := cmp.Diff([]string{"Created", "DeleteRequested", "ContainerDeleted"}, eventTypes(h.events(id))); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", id, diff)
		}
		if got := h.state(id); got != "deleted" {
			t.Errorf("%s: state %q, want deleted", id, got)
		}
	}
}

func TestRun(t *testing.T) {
	t.Run("deployment becomes ready", func(t *testing.T) {
		h := newHarness(t)
		ch := h.runAsync(t.Context(), "run", "web", "--image", "nginx:1.27", "--timeout=30s")
		eventually(t, "the deployment and the monitor's watch", func() bool {
			_, err := h.deployment("", "default", "web")
			return err == nil && h.clusters[""].watching("deployments")
		})
		d, _ := h.deployment("", "default", "web")
		d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		if _, err := h.clusters[""].AppsV1().Deployments("default").UpdateStatus(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch)
		checkExit(t, r, 0, "")
		if diff := cmp.Diff(webID+"\n", r.stdout); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
		if got := h.state(webID); got != "running" {
			t.Errorf("state %q, want running", got)
		}
		if diff := cmp.Diff([]string{"Created", "StartRequested", "ContainerStarted"}, eventTypes(h.events(webID))); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("job that failed", func(t *testing.T) {
		h := newHarness(t)
		ch := h.runAsync(t.Context(), "run", "once", "--kind", "job", "--image", "busybox", "--timeout=30s", "-o", "json")
		eventually(t, "the job and the monitor's watch", func() bool {
			_, err := h.job("", "default", "once")
			return err == nil && h.clusters[""].watching("jobs")
		})
		setJobStatus(t, h, "default", "once", jobFailed)
		r := await(t, ch)
		checkExit(t, r, 1, "run k8s-default|job|once: wait for exited: k8s-default|job|once is failed")
		if r.stdout != "" {
			t.Errorf("stdout %q", r.stdout)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		h := newHarness(t)
		r := await(t, h.runAsync(t.Context(), "run", "web", "--image", "nginx:1.27", "--timeout=300ms"))
		checkExit(t, r, 1, "timed out after 300ms waiting for started: "+webID+" (starting)")
		// The workload stays, recorded: the user can wait again or delete it.
		if got := h.state(webID); got != "starting" {
			t.Errorf("state %q, want starting", got)
		}
	})
}

// TestWaitReleasesLeases: once wait has returned, its monitor is done with
// the database: no lease is left behind for another process to wait out.
func TestWaitReleasesLeases(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	setJobStatus(t, h, "default", "task", jobComplete)
	for i := range 10 {
		r := await(t, h.runAsync(t.Context(), "wait", "web", "--for=exited", "--timeout=200ms"))
		checkExit(t, r, 1, "timed out")
		if held := h.leases(webID); held != "" {
			t.Fatalf("run %d: after wait returned, %s is still leased by %s", i, webID, held)
		}
	}
}

// TestWaitForDeletedWaitsForTheObject: the record says deleted at the
// request, but --for=deleted holds until the object is gone, as kubectl
// wait --for=delete does (a finalizer keeps it here).
func TestWaitForDeletedWaitsForTheObject(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	c := h.clusters[""]
	c.PrependReactor("delete", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // accepted; the object stays, as with a finalizer
	})
	h.ok("delete", "web")
	r := h.run("wait", "web", "--for=deleted", "--timeout=500ms")
	checkExit(t, r, 1, "timed out after 500ms waiting for deletion: "+webID+" still exist")

	if err := c.Tracker().Delete(appsv1.SchemeGroupVersion.WithResource("deployments"), "default", "web"); err != nil {
		t.Fatal(err)
	}
	r = h.run("wait", "web", "--for=deleted", "--timeout=30s")
	checkExit(t, r, 0, "")
	if r.stdout != "deployment.apps/web condition met (deleted)\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if got := eventTypes(h.events(webID)); got[len(got)-1] != "ContainerDeleted" {
		t.Errorf("events %v, want ContainerDeleted last", got)
	}
}

// record returns the `ps -a -o json` view of id.
func (h *harness) record(id string) view {
	h.t.Helper()
	for _, v := range h.ps("-a") {
		if v.RuntimeID == id {
			return v
		}
	}
	h.t.Fatalf("no record of %s", id)
	return view{}
}

func waitingPod(ns, workload, podName string, st corev1.PodStatus) *corev1.Pod {
	p := podOf(ns, workload, podName)
	p.Status = st
	return p
}

// TestWaitFailsFast: a wait ends at once, exit code 1, with one line naming
// the ID, the kubelet's reason and message (escaped for the terminal) and
// what to do, when the newest pod waits with a reason that will not go
// away on its own; the record keeps its state with the reason. An
// unschedulable pod does not end the wait: its timeout says why.
func TestWaitFailsFast(t *testing.T) {
	pull := corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "web",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"ngnix:1.27\"\x1b[2J"}}}}}
	crash := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "task", RestartCount: 5,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 2m40s restarting failed container=task pod=task-1"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}}
	unschedulable := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	tests := []struct {
		name       string
		kind, pod  string
		status     corev1.PodStatus
		args       []string
		wantMsg    string
		wantReason string
		wantCode   *int32
	}{
		{
			name: "image pull back-off", kind: "deployment", pod: "web", status: pull,
			args:       []string{"wait", "web", "--for=started", "--timeout=5m"},
			wantMsg:    `k8s-default|deployment|web: ImagePullBackOff: Back-off pulling image "ngnix:1.27"^[[2J (check the image name and pull secrets; kubectl gobrave inspect web)`,
			wantReason: "ImagePullBackOff",
		},
		{
			name: "crash loop of a job", kind: "job", pod: "task", status: crash,
			args:       []string{"wait", "job/task", "--for=exited", "--timeout=5m"},
			wantMsg:    "k8s-default|job|task: CrashLoopBackOff: back-off 2m40s restarting failed container=task pod=task-1; last exit code 3 (Error) (the container keeps exiting: see kubectl gobrave logs --previous task; kubectl gobrave inspect task)",
			wantReason: "CrashLoopBackOff", wantCode: ptr(int32(3)),
		},
		{
			name: "unschedulable waits for its timeout", kind: "deployment", pod: "web", status: unschedulable,
			args:       []string{"wait", "web", "--for=started", "--timeout=1s"},
			wantMsg:    "timed out after 1s waiting for started: k8s-default|deployment|web (created, Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.)",
			wantReason: "Unschedulable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			seedWebTask(t, h)
			h.addOwnedPod("", tt.kind, waitingPod("default", tt.pod, tt.pod+"-1", tt.status))
			r := h.run(tt.args...)
			checkExit(t, r, 1, "")
			if r.msg != tt.wantMsg {
				t.Errorf("error\n %q\nwant\n %q", r.msg, tt.wantMsg)
			}
			id := "k8s-default|" + tt.kind + "|" + tt.pod
			v := h.record(id)
			if v.State != "created" || v.Reason != tt.wantReason || !cmp.Equal(v.ExitCode, tt.wantCode) {
				t.Errorf("record: state %s reason %q exit code %v; want created, %q, %v", v.State, v.Reason, v.ExitCode, tt.wantReason, tt.wantCode)
			}
			evs := h.events(id)
			if last := evs[len(evs)-1]; last.Type != "ContainerWaiting" || last.Reason != tt.wantReason {
				t.Errorf("last event %s %q, want ContainerWaiting %q", last.Type, last.Reason, tt.wantReason)
			}
		})
	}
}

// TestWaitStaleReason: a waiting reason recorded before the wait began,
// whose pod has recovered since (the image appeared), does not end the
// wait: the pod is read to confirm it, and the wait goes on until the
// workload starts.
func TestWaitStaleReason(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	d, err := h.deployment("", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), h.statePath)
	if err != nil {
		t.Fatal(err)
	}
	_, ok, err := st.Apply(t.Context(), store.Transition{RuntimeID: webID, Type: store.ContainerWaiting, UID: string(d.UID),
		Message: `Back-off pulling image "nginx:1.27"`, Result: store.Result{Reason: "ImagePullBackOff"}})
	st.Close()
	if err != nil || !ok {
		t.Fatalf("record the old reason: %v, %v", ok, err)
	}
	h.addOwnedPod("", "deployment", podOf("default", "web", "web-1")) // running and ready now
	ch := h.runAsync(t.Context(), "wait", "web", "--for=started", "--timeout=30s")
	eventually(t, "the monitor's watch", func() bool { return h.clusters[""].watching("deployments") })
	d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := h.clusters[""].AppsV1().Deployments("default").UpdateStatus(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch)
	checkExit(t, r, 0, "")
	if v := h.record(webID); v.State != "running" || v.Reason != "" {
		t.Errorf("record %s, reason %q; want running with no reason", v.State, v.Reason)
	}
}

// TestWaitWarnsOnceWhileListsFail: while the API server cannot list, wait
// says so in one escaped warning line naming what it lists and the cause,
// not a client-go log line per retry, and then fails with its one error
// line when the sync time runs out.
func TestWaitWarnsOnceWhileListsFail(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	var lists atomic.Int32
	h.clusters[""].PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return true, nil, apierrors.NewServiceUnavailable("etcd is down\x1b[2J")
	})
	r := h.run("wait", "job/task", "--for=exited", "--request-timeout=2s")
	checkExit(t, r, 1, `timed out after 2s waiting for the job informer in namespace "default" to sync (last error: etcd is down^[[2J): check the connection to the cluster ('kubectl gobrave doctor') and access with 'kubectl auth can-i list jobs -n default'`)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	want := []string{
		`warning: cannot list or watch jobs in namespace "default" (retrying): etcd is down^[[2J`,
		"error: " + r.msg,
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	// More than one failed list, one warning.
	if n := lists.Load(); n < 2 {
		t.Errorf("%d lists of jobs, want the reflector's retries (at least 2)", n)
	}
}
