package cmd_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// seedLogs records web (a deployment) and task (a job) labelled team=a, and
// other (a job) labelled team=b, each with a pod whose container runs.
func seedLogs(t *testing.T, h *harness) {
	t.Helper()
	h.ok("create", "web", "--image", "nginx:1.27", "-l", "team=a")
	h.ok("create", "task", "--kind", "job", "--image", "busybox", "-l", "team=a", "-l", "tier=batch")
	h.ok("create", "other", "--kind", "job", "--image", "busybox", "-l", "team=b")
	for _, w := range []struct{ kind, name string }{{"deployment", "web"}, {"job", "task"}, {"job", "other"}} {
		p := podOf("default", w.name, w.name+"-1")
		p.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
		h.addOwnedPod("", w.kind, p)
	}
	h.clearActions()
}

// TestLogsMany: several IDs or -l stream every workload's log with a
// [NAME] prefix, coloured only when asked; --prefix adds it for one.
func TestLogsMany(t *testing.T) {
	h := newHarness(t)
	seedLogs(t, h)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"one workload: as kubectl prints it", []string{"logs", "web"}, "fake logs"},
		{"one workload with --prefix", []string{"logs", "web", "--prefix"}, "[web] fake logs\n"},
		{"two IDs, in the order given", []string{"logs", "task", "web"}, "[task] fake logs\n[web] fake logs\n"},
		{"-l, by runtime ID", []string{"logs", "-l", "team=a"}, "[web] fake logs\n[task] fake logs\n"},
		{"-l with a set selector", []string{"logs", "-l", "team in (a,b),tier!=batch"}, "[web] fake logs\n[other] fake logs\n"},
		{"--color always", []string{"logs", "-l", "team=a", "--color", "always"}, "\x1b[96m[web]\x1b[0m fake logs\n\x1b[92m[task]\x1b[0m fake logs\n"},
		{"auto without a terminal: no colour", []string{"logs", "-l", "team=b", "--color", "auto"}, "[other] fake logs\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...)
			checkExit(t, r, 0, "")
			if r.stdout != tt.want {
				t.Errorf("stdout %q, want %q", r.stdout, tt.want)
			}
		})
	}

	// Nothing matches: exit 1 saying where it looked.
	r := h.run("logs", "-l", "team=zzz")
	checkExit(t, r, 1, "no workload in any namespace has labels matching -l team=zzz")
	r = h.run("logs", "-l", "team=a", "-n", "team-b")
	checkExit(t, r, 1, "no workload in namespace team-b")

	// Following more workloads than --max-log-requests: exit 2 before any
	// API request, one line naming the number to raise it to.
	h.clearActions()
	r = h.run("logs", "-f", "web", "task", "other", "--max-log-requests", "2")
	checkExit(t, r, 2, "following 3 workloads needs 3 log streams, more than --max-log-requests 2: raise it with --max-log-requests 3")
	if strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr %q, want one line", r.stderr)
	}
	r = h.run("logs", "-f", "-l", "team in (a,b)", "--max-log-requests", "1")
	checkExit(t, r, 2, "--max-log-requests 3")
	if n := h.actions(); n != 0 {
		t.Errorf("a refused follow made %d API requests:\n%s", n, h.describeActions())
	}
}

// TestLogsFollowMany: -f over two workloads prints both, each line whole
// and prefixed, and ends with exit 0 on Ctrl-C.
func TestLogsFollowMany(t *testing.T) {
	h := newHarness(t)
	seedLogs(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := h.runAsync(ctx, "logs", "-f", "web", "task")
	// The fake's streams end at once; the job's follow ends when it is
	// finished, the deployment's only on Ctrl-C. Both pods are read once.
	eventually(t, "the deployment's log requests", func() bool {
		n := 0
		for _, a := range h.clusters[""].Actions() {
			if a.GetSubresource() == "log" {
				n++
			}
		}
		return n == 2
	})
	cancel()
	r := await(t, ch)
	checkExit(t, r, 0, "")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !slices.Contains(lines, "[web] fake logs") || !slices.Contains(lines, "[task] fake logs") {
		t.Errorf("stdout %q, want one prefixed line per workload", r.stdout)
	}
}

// TestLogsFollowWarnsWhileWatchFails: a watch of logs -f that cannot list
// (here the workload object's own) is one escaped warning line on stderr
// however often it is retried, and following goes on: the log is printed
// and Ctrl-C ends it with exit 0.
func TestLogsFollowWarnsWhileWatchFails(t *testing.T) {
	h := newHarness(t)
	seedLogs(t, h)
	var lists atomic.Int32
	h.clusters[""].PrependReactor("list", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.ListAction).GetListRestrictions().Fields.String() != "metadata.name=web" {
			return false, nil, nil
		}
		lists.Add(1)
		return true, nil, apierrors.NewServiceUnavailable("etcd is down\x1b]0;owned\a")
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := h.runAsync(ctx, "logs", "-f", "web")
	eventually(t, "two failed lists of the deployment", func() bool { return lists.Load() >= 2 })
	cancel()
	r := await(t, ch)
	checkExit(t, r, 0, "")
	if r.stdout != "fake logs" {
		t.Errorf("stdout %q, want the log", r.stdout)
	}
	want := "warning: cannot list or watch k8s-default|deployment|web (retrying): etcd is down^[]0;owned^G\n"
	if r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}
