package cmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodeAll decodes a stream of JSON values.
func decodeAll(t *testing.T, s string) []map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var out []map[string]any
	for {
		var v map[string]any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
		out = append(out, v)
	}
}

func TestMonitorUntilTerminal(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	ch := h.runAsync(t.Context(), "monitor", "job/task", "-o", "json")
	eventually(t, "the monitor's watch of jobs", func() bool { return h.clusters[""].watching("jobs") })
	setJobStatus(t, h, "default", "task", jobComplete)
	r := await(t, ch)
	checkExit(t, r, 0, "")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("stdout has %d lines, want one JSON line:\n%s", len(lines), r.stdout)
	}
	var e eventView
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e.RuntimeID != taskID || e.Type != "ContainerExited" || e.Message != "0" {
		t.Errorf("event %+v", e)
	}
	if got := h.state(taskID); got != "exited" {
		t.Errorf("state %q, want exited", got)
	}
}

func TestMonitorNothingToDo(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	h.ok("delete", "task")
	h.clearActions()
	r := h.run("monitor", "task")
	checkExit(t, r, 0, "")
	if r.stdout != "" || r.stderr != "Nothing to monitor: every ID is terminal.\n" {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	if n := h.actions(); n != 0 {
		t.Errorf("%d API requests: %s", n, h.describeActions())
	}
}

func TestRecoverOnce(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	setJobStatus(t, h, "default", "task", jobComplete)
	r := await(t, h.runAsync(t.Context(), "recover", "--once", "-o", "json"))
	checkExit(t, r, 0, "")
	vs := decodeAll(t, r.stdout)
	if len(vs) != 2 {
		t.Fatalf("want one event and the summary, got %d values:\n%s", len(vs), r.stdout)
	}
	if vs[0]["runtimeID"] != taskID || vs[0]["type"] != "ContainerExited" {
		t.Errorf("event %v", vs[0])
	}
	if diff := cmp.Diff(map[string]any{"reattached": float64(2), "changed": float64(1), "terminal": float64(1)}, vs[1]); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if got := h.state(taskID); got != "exited" {
		t.Errorf("task: state %q, want exited", got)
	}
	if got := h.state(webID); got != "created" {
		t.Errorf("web: state %q, want created", got)
	}
}

func TestRecoverDeletedMeanwhile(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	// web was deleted with kubectl while nothing watched.
	if err := h.clusters[""].AppsV1().Deployments("default").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, h.runAsync(t.Context(), "recover", "--once"))
	checkExit(t, r, 0, "")
	if !strings.HasSuffix(r.stdout, "reattached 2, changed 1, now terminal 1\n") {
		t.Errorf("stdout %q", r.stdout)
	}
	if got := h.state(webID); got != "deleted" {
		t.Errorf("web: state %q, want deleted", got)
	}
}

func TestPsRefresh(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	setJobStatus(t, h, "default", "task", jobComplete)
	r := await(t, h.runAsync(t.Context(), "ps", "--refresh", "-a", "-o", "name", "--state", "exited"))
	checkExit(t, r, 0, "")
	if diff := cmp.Diff(taskID+"\n", r.stdout); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestFollowPicksUpNewIDs: `monitor --all --follow` and `recover` keep running and take on the IDs
// created after they started (by another process), reading the new events of the database.
func TestFollowPicksUpNewIDs(t *testing.T) {
	for _, args := range [][]string{{"monitor", "--all", "--follow", "-o", "json"}, {"recover", "-o", "json"}} {
		t.Run(args[0], func(t *testing.T) {
			h := newHarness(t)
			h.ok("create", "web", "--image", "nginx:1.27")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ch := h.runAsync(ctx, args...)
			// Its first list is done: web's deployment is watched, no job is.
			eventually(t, "the watch of deployments", func() bool { return h.clusters[""].watching("deployments") })
			if h.clusters[""].watching("jobs") {
				t.Fatal("jobs are watched before any job exists")
			}
			h.ok("create", "task", "--kind", "job", "--image", "busybox")
			eventually(t, "the watch of jobs for the new task", func() bool { return h.clusters[""].watching("jobs") })
			setJobStatus(t, h, "default", "task", jobComplete)
			eventually(t, "task recorded as exited", func() bool { return h.state(taskID) == "exited" })
			cancel()
			r := await(t, ch)
			checkExit(t, r, 0, "")
			var exited bool
			for _, v := range decodeAll(t, r.stdout) {
				if v["runtimeID"] == taskID && v["type"] == "ContainerExited" {
					exited = true
				}
			}
			if !exited {
				t.Errorf("%s printed no ContainerExited for %s:\n%s", args[0], taskID, r.stdout)
			}
		})
	}
}
