package cmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
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

// TestPsRefreshNamespace: ps --refresh is the reconcile pass of recover --once over the records
// of -n only: a deployment deleted while nothing watched is recorded deleted by a refresh of its
// namespace, not by one of another namespace, and neither reads an object by name.
func TestPsRefreshNamespace(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	if err := h.clusters[""].AppsV1().Deployments("default").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.clearActions()
	r := await(t, h.runAsync(t.Context(), "ps", "-n", "elsewhere", "--refresh"))
	checkExit(t, r, 0, "")
	if got := h.state(webID); got == "deleted" {
		t.Errorf("ps -n elsewhere --refresh recorded web %s", got)
	}
	r = await(t, h.runAsync(t.Context(), "ps", "-n", "default", "--refresh", "-a", "-o", "name", "--state", "deleted"))
	checkExit(t, r, 0, "")
	if diff := cmp.Diff(webID+"\n", r.stdout); diff != "" {
		t.Errorf("ps -n default --refresh (-want +got):\n%s", diff)
	}
	for _, c := range h.clusters {
		for _, a := range c.Actions() {
			if a.GetVerb() == "get" {
				t.Errorf("ps --refresh read an object by name: %s", h.describeActions())
				break
			}
		}
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

// TestFollowPicksUpRevivedIDs: `monitor --all --follow` and `recover` take on
// an ID whatever event made its record non-terminal, not only a create,
// start or resume: an adoption, a stop of an exited record.
const apiID = "k8s-default|deployment|api"

// setDeployment sets a deployment's spec.replicas and its status, as a
// controller (or someone else) would.
func setDeployment(t *testing.T, h *harness, name string, replicas int32, st appsv1.DeploymentStatus) {
	t.Helper()
	d, err := h.deployment("", "default", name)
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = &replicas
	if d, err = h.clusters[""].AppsV1().Deployments("default").Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.Status = st
	if _, err := h.clusters[""].AppsV1().Deployments("default").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestFollowPicksUpRevivedIDs(t *testing.T) {
	const adoptedID = "k8s-team-a|deployment|web"
	tests := []struct {
		name string
		// live is created first and stays non-terminal: the watch of its
		// resource shows that the command has listed the records.
		live     []string
		liveRes  string
		before   func(t *testing.T, h *harness) // before the command starts
		revive   func(t *testing.T, h *harness) // makes id non-terminal
		then     func(t *testing.T, h *harness) // makes the cluster report wantType
		id       string
		res      string // id's resource
		wantType string
		want     string // id's state at the end
	}{
		{
			// The engine confirms at once what a read can tell; here the
			// deployment, scaled up again outside gobrave after it exited,
			// still reports a replica after the second stop.
			name: "stop of an exited deployment",
			live: []string{"create", "task", "--kind", "job", "--image", "busybox"}, liveRes: "jobs",
			before: func(t *testing.T, h *harness) {
				h.ok("create", "api", "--image", "nginx:1.27")
				h.ok("stop", "api")
				if got := h.state(apiID); got != "exited" {
					t.Fatalf("api: state %q, want exited", got)
				}
				setDeployment(t, h, "api", 1, appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1})
			},
			revive: func(t *testing.T, h *harness) {
				h.ok("stop", "api")
				if got := h.state(apiID); got != "stopping" {
					t.Fatalf("api: state %q, want stopping", got)
				}
			},
			then: func(t *testing.T, h *harness) {
				setDeployment(t, h, "api", 0, appsv1.DeploymentStatus{})
			},
			id:       apiID,
			res:      "deployments",
			wantType: "ContainerExited",
			want:     "exited",
		},
		{
			name: "adopted deployment",
			live: []string{"create", "task", "--kind", "job", "--image", "busybox"}, liveRes: "jobs",
			before: func(t *testing.T, h *harness) {
				objs, err := runtime.Build(spec.ContainerSpec{Name: "web", Image: "nginx:1.27"}, "team-a")
				if err != nil {
					t.Fatal(err)
				}
				objs.Deployment.UID = "uid-adopted"
				if _, err := h.clusters[""].AppsV1().Deployments("team-a").Create(t.Context(), objs.Deployment, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			revive: func(t *testing.T, h *harness) {
				h.ok("adopt", "-n", "team-a")
				if got := h.state(adoptedID); got != "starting" {
					t.Fatalf("adopted: state %q, want starting", got)
				}
			},
			then: func(t *testing.T, h *harness) {
				d, err := h.deployment("", "team-a", "web")
				if err != nil {
					t.Fatal(err)
				}
				d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
				if _, err := h.clusters[""].AppsV1().Deployments("team-a").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			id:       adoptedID,
			res:      "deployments",
			wantType: "ContainerStarted",
			want:     "running",
		},
	}
	for _, args := range [][]string{{"monitor", "--all", "--follow", "-o", "json"}, {"recover", "-o", "json"}} {
		for _, tt := range tests {
			t.Run(args[0]+"/"+tt.name, func(t *testing.T) {
				h := newHarness(t)
				h.ok(tt.live...)
				tt.before(t, h)
				c := h.clusters[""]
				liveWatches, watches := c.watchCount(tt.liveRes), c.watchCount(tt.res)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				ch := h.runAsync(ctx, args...)
				eventually(t, "the watch of "+tt.liveRes, func() bool { return c.watchCount(tt.liveRes) > liveWatches })
				if c.watchCount(tt.res) > watches {
					t.Fatalf("%s are watched before any is to be followed", tt.res)
				}
				tt.revive(t, h)
				eventually(t, "the watch of "+tt.res, func() bool { return c.watchCount(tt.res) > watches })
				tt.then(t, h)
				eventually(t, tt.id+" "+tt.want, func() bool { return h.state(tt.id) == tt.want })
				cancel()
				r := await(t, ch)
				checkExit(t, r, 0, "")
				var seen bool
				for _, v := range decodeAll(t, r.stdout) {
					if v["runtimeID"] == tt.id && v["type"] == tt.wantType {
						seen = true
					}
				}
				if !seen {
					t.Errorf("%s printed no %s for %s:\n%s", args[0], tt.wantType, tt.id, r.stdout)
				}
			})
		}
	}
}

// writeCounter counts the writes made to it.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestRecoverOnceWritesOnce: recover --once buffers its output, the event
// lines and the summary, into one write (a system call per event line was
// 100,000 of them at N = 100,000).
func TestRecoverOnceWritesOnce(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	setJobStatus(t, h, "default", "task", jobComplete)
	out := &writeCounter{}
	f := h.factory()
	root := cmd.NewCmdRoot(f, genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: &bytes.Buffer{}})
	root.SetArgs([]string{"recover", "--once"})
	err := root.ExecuteContext(t.Context())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ContainerExited") || !strings.HasSuffix(out.String(), "reattached 2, changed 1, now terminal 1\n") {
		t.Errorf("stdout %q", out.String())
	}
	if out.writes != 1 {
		t.Errorf("%d writes of %q, want 1", out.writes, out.String())
	}
}
