package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lastStderrLine is the error line of a failed command.
func lastStderrLine(r result) string {
	return lastLine(strings.TrimRight(r.stderr, "\n"))
}

// checkWaiting asserts the record of id: not moved to a terminal state, with reason and exit code
// (nil: unknown), and a ContainerWaiting event with that reason last.
func checkWaiting(t *testing.T, e *monEnv, id, state, reason string, exitCode *int32) {
	t.Helper()
	w := e.records()[id]
	if w.State != state || w.Reason != reason {
		t.Errorf("%s: record %s, reason %q; want %s, %q", id, w.State, w.Reason, state, reason)
	}
	switch {
	case exitCode == nil && w.ExitCode != nil:
		t.Errorf("%s: exit code %d, want null", id, *w.ExitCode)
	case exitCode != nil && (w.ExitCode == nil || *w.ExitCode != *exitCode):
		t.Errorf("%s: exit code %v, want %d", id, w.ExitCode, *exitCode)
	}
	var waiting []monEvent
	for _, ev := range e.events(id) {
		if ev.Type == "ContainerWaiting" {
			waiting = append(waiting, ev)
		}
	}
	if len(waiting) == 0 || waiting[len(waiting)-1].Reason != reason {
		t.Errorf("%s: ContainerWaiting events %v, want the last with reason %s", id, waiting, reason)
	}
}

// TestFailFastWaitingReasons: for each reason a kubelet gives a container it cannot start, the
// wait of `run`, `start --wait` and `wait` ends at once (well before its 5-minute timeout; the
// command itself is given 2) with exit code 1 and one line: the ID, the reason, the kubelet's
// message and what to do. The record stays non-terminal with the reason.
func TestFailFastWaitingReasons(t *testing.T) {
	tests := []struct {
		reason string
		name   string
		image  string
		// verbs run in order; the last one is expected to fail fast.
		verbs [][]string
		kind  string
		// message is the kubelet's message as the stage writes it.
		message string
		hint    string
	}{
		{
			reason: "ImagePullBackOff", name: "web", image: "ngnix:1.27", kind: "deployment",
			verbs:   [][]string{{"run", "web", "--image", "ngnix:1.27", "--label", labelWaiting + "=ImagePullBackOff", "--timeout", "5m"}},
			message: `Back-off pulling image "ngnix:1.27"`, hint: "check the image name and pull secrets",
		},
		{
			reason: "ErrImagePull", name: "task", image: "registry.invalid/nope:1", kind: "job",
			verbs:   [][]string{{"run", "task", "--kind", "job", "--image", "registry.invalid/nope:1", "--label", labelWaiting + "=ErrImagePull", "--timeout", "5m"}},
			message: `failed to pull and unpack image "registry.invalid/nope:1": failed to resolve reference "registry.invalid/nope:1": registry.invalid/nope:1: not found`,
			hint:    "check the image name and pull secrets",
		},
		{
			reason: "InvalidImageName", name: "bad", image: "registry.invalid/Bad:1", kind: "deployment",
			verbs: [][]string{
				{"create", "bad", "--image", "registry.invalid/Bad:1", "--label", labelWaiting + "=InvalidImageName"},
				{"wait", "bad", "--for", "started", "--timeout", "5m"},
			},
			message: `Failed to apply default image tag "registry.invalid/Bad:1": couldn't parse image name "registry.invalid/Bad:1": invalid reference format`,
			hint:    "fix the image reference: registry/name:tag or name@sha256:digest",
		},
		{
			reason: "CreateContainerConfigError", name: "cfg", image: "registry.invalid/cfg:1", kind: "deployment",
			verbs: [][]string{
				{"create", "cfg", "--image", "registry.invalid/cfg:1", "--label", labelWaiting + "=CreateContainerConfigError"},
				{"start", "cfg", "--wait", "--timeout", "5m"},
			},
			message: `secret "gobrave-missing" not found`, hint: "check the Secrets, ConfigMaps and environment the spec refers to",
		},
		{
			reason: "CreateContainerError", name: "cmd", image: "registry.invalid/cmd:1", kind: "job",
			verbs: [][]string{
				{"create", "cmd", "--kind", "job", "--image", "registry.invalid/cmd:1", "--label", labelWaiting + "=CreateContainerError"},
				{"start", "job/cmd", "--wait", "--timeout", "5m"},
			},
			message: "failed to generate container spec: no command specified", hint: "check the command, entrypoint and mounts of the spec",
		},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			t.Parallel()
			e := newMonEnv(t)
			for _, v := range tt.verbs[:len(tt.verbs)-1] {
				e.runOK(v...)
			}
			r := e.run(tt.verbs[len(tt.verbs)-1]...)
			id := fmt.Sprintf("k8s-%s|%s|%s", e.ns, tt.kind, tt.name)
			want := fmt.Sprintf("error: %s: %s: %s (%s; kubectl gobrave inspect %s)", id, tt.reason, tt.message, tt.hint, tt.name)
			if r.code != 1 || lastStderrLine(r) != want {
				t.Fatalf("got %s\nwant exit code 1 and the line\n%s", r, want)
			}
			state := "starting"
			if tt.verbs[0][0] == "create" && tt.verbs[1][0] == "wait" {
				state = "created"
			}
			checkWaiting(t, e, id, state, tt.reason, nil)
		})
	}
}

// crashInspect is the part of `inspect -o json` these tests read.
type crashInspect struct {
	Reason          string `json:"reason"`
	ExitCode        *int32 `json:"exitCode"`
	Restarts        int32  `json:"restarts"`
	PodReason       string `json:"podReason"`
	PodMessage      string `json:"podMessage"`
	LastTermination *struct {
		ExitCode int32  `json:"exitCode"`
		Reason   string `json:"reason"`
	} `json:"lastTermination"`
}

// TestFailFastCrashLoop: a service whose container keeps exiting 3 fails its `run` at once with
// the back-off, the last exit code and what to do; the record keeps state starting with reason
// CrashLoopBackOff and exit code 3, and inspect shows the restarts climbing and the last
// termination.
func TestFailFastCrashLoop(t *testing.T) {
	e := newMonEnv(t)
	id := fmt.Sprintf("k8s-%s|deployment|crash", e.ns)
	r := e.run("run", "crash", "--image", "registry.invalid/crash:1", "--label", labelCrashLoop+"=3", "--timeout", "5m")
	line := lastStderrLine(r)
	prefix := fmt.Sprintf("error: %s: CrashLoopBackOff: back-off ", id)
	suffix := "; last exit code 3 (Error) (the container keeps exiting: see kubectl gobrave logs --previous crash; kubectl gobrave inspect crash)"
	if r.code != 1 || !strings.HasPrefix(line, prefix) || !strings.HasSuffix(line, suffix) || !strings.Contains(line, "restarting failed container=crash pod=crash-") {
		t.Fatalf("got %s\nwant exit code 1 and a line %q … %q", r, prefix, suffix)
	}
	three := int32(3)
	checkWaiting(t, e, id, "starting", "CrashLoopBackOff", &three)

	var v crashInspect
	waitFor(t, waitTimeout, func() (bool, error) {
		out := e.runOK("inspect", "crash", "-o", "json").stdout
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return false, err
		}
		if v.Restarts < 3 {
			return false, fmt.Errorf("%d restarts", v.Restarts)
		}
		return true, nil
	})
	if v.PodReason != "CrashLoopBackOff" || !strings.HasPrefix(v.PodMessage, "back-off ") || v.LastTermination == nil ||
		v.LastTermination.ExitCode != 3 || v.LastTermination.Reason != "Error" || v.Reason != "CrashLoopBackOff" || v.ExitCode == nil || *v.ExitCode != 3 {
		t.Errorf("inspect -o json: %+v (last termination %+v), want the crash loop with exit code 3 (Error)", v, v.LastTermination)
	}
	readable := e.runOK("inspect", "crash").stdout
	if !strings.Contains(readable, "exit code 3 (Error)") {
		t.Errorf("inspect does not show the last termination:\n%s", readable)
	}
}

// TestUnschedulableWaitsForTimeout: a pod no node fits does not end the wait (the cluster may
// grow); the timeout error carries the real scheduler's message, and the record has reason
// Unschedulable.
func TestUnschedulableWaitsForTimeout(t *testing.T) {
	e := newMonEnv(t)
	id := fmt.Sprintf("k8s-%s|deployment|nowhere", e.ns)
	begin := time.Now()
	r := e.run("run", "nowhere", "--image", "registry.invalid/web:1", "--node-constraint", "gobrave.test/nowhere Exists", "--timeout", "10s")
	if r.code != 1 {
		t.Fatalf("got %s, want exit code 1", r)
	}
	pods, err := client(t).CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "gobrave-workload=nowhere"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of nowhere: %v, %v", pods, err)
	}
	var schedulerMsg string
	for _, c := range pods.Items[0].Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
			schedulerMsg = c.Message
		}
	}
	if !strings.Contains(schedulerMsg, "didn't match Pod's node affinity/selector") {
		t.Fatalf("the scheduler's message %q does not say why", schedulerMsg)
	}
	want := fmt.Sprintf("error: run %s: timed out after 10s waiting for started: %s (starting, Unschedulable: %s)", id, id, schedulerMsg)
	if got := lastStderrLine(r); got != want {
		t.Errorf("error line\n%s\nwant\n%s", got, want)
	}
	// The wait ran to its timeout: the command ended after it, not at once.
	if elapsed := time.Since(begin); elapsed < 10*time.Second {
		t.Errorf("run ended after %s, before its 10s timeout", elapsed)
	}
	checkWaiting(t, e, id, "starting", "Unschedulable", nil)
}

// TestWaitingReasonClears: a workload with a waiting reason is not failed, so it recovers on its
// own: when its pod can start after all (here the stage's label is taken off the pod, as if the
// image had been pushed), it becomes running, ContainerStarted is recorded after the
// ContainerWaiting, and the reason is cleared.
func TestWaitingReasonClears(t *testing.T) {
	e := newMonEnv(t)
	id := fmt.Sprintf("k8s-%s|deployment|late", e.ns)
	r := e.run("run", "late", "--image", "registry.invalid/late:1", "--label", labelWaiting+"=ImagePullBackOff", "--timeout", "5m")
	if r.code != 1 || !strings.Contains(lastStderrLine(r), "ImagePullBackOff") {
		t.Fatalf("run of an image not there yet: %s, want exit code 1 with ImagePullBackOff", r)
	}
	checkWaiting(t, e, id, "starting", "ImagePullBackOff", nil)

	// The image appears: the pod starts.
	kr := kubectl(t, "label", "pods", "-n", e.ns, "-l", "gobrave-workload=late", labelWaiting+"-")
	if kr.code != 0 {
		t.Fatalf("kubectl label: %s", kr)
	}
	e.runOK("wait", "late", "--for", "started", "--timeout", "1m")
	w := e.records()[id]
	if w.State != "running" || w.Reason != "" || w.ExitCode != nil {
		t.Errorf("record %s, reason %q, exit code %v; want running with no reason", w.State, w.Reason, w.ExitCode)
	}
	var types []string
	for _, ev := range e.events(id) {
		if ev.observed() {
			types = append(types, ev.Type+":"+ev.Reason)
		}
	}
	if want := []string{"ContainerWaiting:ImagePullBackOff", "ContainerStarted:"}; strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("observed events %v, want %v", types, want)
	}
}
