package e2e

// Suspended jobs, restart and --progress-deadline on the real control plane (issue 13): the
// job controller's own Suspended condition, a real `kubectl patch`, the deployment controller's
// own ProgressDeadlineExceeded and the real scheduler.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// waitNoPods waits until no pod matches selector in ns (a suspended job's pods are deleted by
// the job controller).
func waitNoPods(t testing.TB, ns, selector string) {
	t.Helper()
	waitFor(t, waitTimeout, func() (bool, error) {
		pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		if n := len(pods.Items); n > 0 {
			return false, fmt.Errorf("%d pods still match %q", n, selector)
		}
		return true, nil
	})
}

// replicaSets returns the names of the ReplicaSets owned by the deployment with uid.
func replicaSets(t testing.TB, ns string, uid string) []string {
	t.Helper()
	rss, err := client(t).AppsV1().ReplicaSets(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rs := range rss.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && string(ref.UID) == uid {
			names = append(names, rs.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestSuspendedJob: a job suspended from outside with `kubectl patch` (as Kueue does) is
// recorded paused ("suspended") once the job controller has suspended it and its pods are gone;
// unsuspended with `kubectl patch`, the same job runs again and completes, recorded exited.
func TestSuspendedJob(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	ns := newNamespace(t)
	// It runs 15 s per pod: long enough to be suspended while it runs.
	id := createID(t, "create", "slow", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelRunFor+"=15s")
	runOK(t, "wait", id, "--for=started", "--timeout", "2m")
	uid := jobUID(t, ns, "slow")

	patched := time.Now()
	kubectlOK(t, "patch", "job", "slow", "-n", ns, "--type", "merge", "-p", `{"spec":{"suspend":true}}`)
	r := runOK(t, "wait", id, "--for=paused", "--timeout", "2m")
	t.Logf("recorded paused %s after kubectl patch began", time.Since(patched).Round(time.Millisecond))
	if want := "job.batch/slow condition met (paused)\n"; r.stdout != want {
		t.Errorf("wait --for=paused printed %q, want %q", r.stdout, want)
	}
	if w := record(t, id); w.State != "paused" || w.Message != "suspended" || w.UID != uid {
		t.Errorf("suspended job: record state=%s message=%q uid=%s, want paused, \"suspended\", %s", w.State, w.Message, w.UID, uid)
	}
	waitNoPods(t, ns, "job-name=slow")
	// Paused is not terminal: ps lists it without -a, and --state paused selects it.
	if ws := psJSON(t, "-n", ns, "--state", "paused"); len(ws) != 1 || ws[0].RuntimeID != id {
		t.Errorf("ps --state paused: %+v, want %s alone", ws, id)
	}

	patched = time.Now()
	kubectlOK(t, "patch", "job", "slow", "-n", ns, "--type", "merge", "-p", `{"spec":{"suspend":false}}`)
	runOK(t, "wait", id, "--for=started", "--timeout", "2m")
	t.Logf("recorded running again %s after kubectl patch began", time.Since(patched).Round(time.Millisecond))
	runOK(t, "wait", id, "--for=exited", "--timeout", "2m")
	if w := record(t, id); w.State != "exited" || w.Message != "0" || w.UID != uid {
		t.Errorf("unsuspended job: record state=%s message=%q uid=%s, want exited, \"0\", %s", w.State, w.Message, w.UID, uid)
	}
	evs := events(t, id)
	requireTypes(t, evs, "Created", "ContainerStarted", "ContainerPaused", "ContainerStarted", "ContainerExited")
	for _, e := range evs {
		if e.UID != uid {
			t.Errorf("event %s is about uid %s, want the one job %s", e.Type, e.UID, uid)
		}
	}
	if got := jobUID(t, ns, "slow"); got != uid {
		t.Errorf("the job was replaced: uid %s, want %s", got, uid)
	}
}

// TestRestart: restart of a running service is a rollout restart (a new ReplicaSet, new pods,
// the same deployment); restart of a finished job is a fresh run (a new job, a new UID), both
// recorded.
func TestRestart(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	t.Run("service", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		id := createID(t, "run", "web", "-n", ns, "--image", "registry.invalid/web:1")
		uid := deploymentUID(t, ns, "web")
		before := replicaSets(t, ns, uid)
		oldPod := waitPodRunning(t, ns, "gobrave-workload=web")
		r := runOK(t, "restart", id, "--wait", "--timeout", "2m")
		if want := fmt.Sprintf("deployment.apps/web restarted (%s)\n", id); r.stdout != want {
			t.Errorf("restart printed %q, want %q", r.stdout, want)
		}
		d := getDeployment(t, ns, "web")
		if string(d.UID) != uid || d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
			t.Errorf("after restart: uid %s annotations %v, want %s with restartedAt", d.UID, d.Spec.Template.Annotations, uid)
		}
		var after []string
		waitFor(t, waitTimeout, func() (bool, error) {
			after = replicaSets(t, ns, uid)
			if len(after) <= len(before) {
				return false, fmt.Errorf("replica sets %v, before the restart %v", after, before)
			}
			return true, nil
		})
		waitFor(t, waitTimeout, func() (bool, error) {
			p := waitPodRunning(t, ns, "gobrave-workload=web")
			if p.UID == oldPod.UID {
				return false, fmt.Errorf("only the old pod %s runs", p.Name)
			}
			return true, nil
		})
		if w := record(t, id); w.State != "running" || w.UID != uid {
			t.Errorf("after restart --wait: record state=%s uid=%s, want running and %s", w.State, w.UID, uid)
		}
		evs := events(t, id)
		requireSubsequence(t, evs, "Created", "ContainerStarted", "RestartRequested", "ContainerStarted")
		if last := evs[len(evs)-2]; last.Type != "RestartRequested" || !strings.Contains(last.Message, "rollout restart") {
			t.Errorf("restart recorded %s %q, want RestartRequested saying rollout restart", last.Type, last.Message)
		}
	})
	t.Run("finished job", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		id := createID(t, "run", "once", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1")
		if w := record(t, id); w.State != "exited" {
			t.Fatalf("run of a job: record %s, want exited", w.State)
		}
		first := jobUID(t, ns, "once")
		r := runOK(t, "restart", id, "--wait", "--timeout", "2m")
		if want := fmt.Sprintf("job.batch/once restarted (%s)\n", id); r.stdout != want {
			t.Errorf("restart printed %q, want %q", r.stdout, want)
		}
		runOK(t, "wait", id, "--for=exited", "--timeout", "2m")
		second := jobUID(t, ns, "once")
		if second == first {
			t.Fatalf("restart did not make a new job: uid %s", second)
		}
		if w := record(t, id); w.State != "exited" || w.UID != second {
			t.Errorf("after restart: record state=%s uid=%s, want exited and the new job's %s", w.State, w.UID, second)
		}
		evs := events(t, id)
		requireSubsequence(t, evs, "Created", "ContainerExited", "RestartRequested", "ContainerExited")
		i := slices.IndexFunc(evs, func(e eventView) bool { return e.Type == "RestartRequested" })
		for _, e := range evs[i+1:] {
			if e.UID != second {
				t.Errorf("event %s after the restart is about uid %s, want the new job's %s", e.Type, e.UID, second)
			}
		}
	})
}

// TestProgressDeadline: a service whose pod cannot be scheduled, created with
// --progress-deadline 2s, fails its wait with exit 1 naming ProgressDeadlineExceeded (the
// deployment controller's own condition); restart starts a new rollout with a new deadline
// (recorded starting, then failed again by the monitor); once the cause is gone, restart --wait
// ends running.
func TestProgressDeadline(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	ns := newNamespace(t)
	key := "gobrave-e2e-deadline-" + randomSuffix(t)
	r := run(t, "run", "web", "-n", ns, "--image", "registry.invalid/web:1", "--progress-deadline", "2s",
		"--node-constraint", key+" In [yes]", "--timeout", "2m")
	requireExit(t, "run with a 2s progress deadline and no node", r, 1)
	if !strings.Contains(r.stderr, "ProgressDeadlineExceeded") {
		t.Errorf("run: stderr %q does not name ProgressDeadlineExceeded", r.stderr)
	}
	id := "k8s-" + ns + "|deployment|web"
	d := getDeployment(t, ns, "web")
	if d.Spec.ProgressDeadlineSeconds == nil || *d.Spec.ProgressDeadlineSeconds != 2 {
		t.Errorf("progressDeadlineSeconds = %v, want 2", d.Spec.ProgressDeadlineSeconds)
	}
	uid := string(d.UID)
	if w := record(t, id); w.State != "failed" || !strings.Contains(w.Message, "ProgressDeadlineExceeded") {
		t.Errorf("record state=%s message=%q, want failed with ProgressDeadlineExceeded", w.State, w.Message)
	}
	before := replicaSets(t, ns, uid)

	// A restart while the cause stays: a new ReplicaSet, and a new deadline that passes too.
	r = run(t, "restart", id, "--wait", "--timeout", "2m")
	requireExit(t, "restart --wait of a deployment that cannot progress", r, 1)
	if !strings.Contains(r.stderr, "ProgressDeadlineExceeded") {
		t.Errorf("restart --wait: stderr %q does not name ProgressDeadlineExceeded", r.stderr)
	}
	if after := replicaSets(t, ns, uid); len(after) <= len(before) {
		t.Errorf("restart made no new ReplicaSet: %v, before %v", after, before)
	}
	requireSubsequence(t, events(t, id), "Created", "ContainerFailed", "RestartRequested", "ContainerFailed")

	// The cause goes (a node gets the label); restart rolls out pods that run.
	node := schedulableNode(t)
	kubectlOK(t, "label", "node", node, key+"=yes")
	t.Cleanup(func() {
		// The test's context is done by now: remove the label with one of its own.
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
		if _, err := client(t).CoreV1().Nodes().Patch(context.Background(), node, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Errorf("remove the label %s from node %s: %v", key, node, err)
		}
	})
	r = runOK(t, "restart", id, "--wait", "--timeout", "2m")
	if want := fmt.Sprintf("deployment.apps/web restarted (%s)\n", id); r.stdout != want {
		t.Errorf("restart printed %q, want %q", r.stdout, want)
	}
	if w := record(t, id); w.State != "running" || w.UID != uid {
		t.Errorf("after restart --wait: record state=%s uid=%s, want running and %s", w.State, w.UID, uid)
	}
	pod := waitPodRunning(t, ns, "gobrave-workload=web")
	if pod.Spec.NodeName != node {
		t.Errorf("pod %s runs on %q, want the labelled node %s", pod.Name, pod.Spec.NodeName, node)
	}
	requireSubsequence(t, events(t, id), "RestartRequested", "ContainerFailed", "RestartRequested", "ContainerStarted")
}

func kubectlOK(t testing.TB, args ...string) result {
	t.Helper()
	r := kubectl(t, args...)
	if r.code != 0 {
		t.Fatalf("kubectl %s: exit %d\n%s", strings.Join(args, " "), r.code, r)
	}
	return r
}
