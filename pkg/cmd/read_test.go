package cmd_test

import (
	"encoding/json"
	"errors"
	goruntime "runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

func TestLogs(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	h.addOwnedPod("", "deployment", podOf("default", "web", "web-abc"))
	h.clearActions()

	tests := []struct {
		args []string
		want corev1.PodLogOptions
	}{
		{[]string{"logs", "web"}, corev1.PodLogOptions{Container: "web", TailLines: ptr(int64(200))}},
		{[]string{"logs", webID, "--tail", "5", "--timestamps"}, corev1.PodLogOptions{Container: "web", TailLines: ptr(int64(5)), Timestamps: true}},
		{[]string{"logs", "deployment/web", "--since", "10m", "--tail", "-1"}, corev1.PodLogOptions{Container: "web", SinceSeconds: ptr(int64(600))}},
		{[]string{"logs", "web", "-p"}, corev1.PodLogOptions{Container: "web", TailLines: ptr(int64(200)), Previous: true}},
	}
	for _, tt := range tests {
		h.clearActions()
		r := h.run(tt.args...)
		checkExit(t, r, 0, "")
		if r.stdout != "fake logs" {
			t.Errorf("%v: stdout %q, want the pod's logs", tt.args, r.stdout)
		}
		var got []corev1.PodLogOptions
		for _, a := range h.clusters[""].Actions() {
			if a.GetSubresource() == "log" && a.GetNamespace() == "default" {
				got = append(got, *a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions))
			}
		}
		if diff := cmp.Diff([]corev1.PodLogOptions{tt.want}, got); diff != "" {
			t.Errorf("%v: log requests (-want +got):\n%s", tt.args, diff)
		}
	}

	// A workload without pods: exit 1 saying what to check.
	r := h.run("logs", "task")
	checkExit(t, r, 1, "has no pod")
	if !strings.Contains(r.msg, "kubectl gobrave inspect") {
		t.Errorf("%q does not say what to do next", r.msg)
	}
}

func TestInspect(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	h.addOwnedPod("", "deployment", podOf("default", "web", "web-abc"))
	h.addOwnedPod("", "job", podOf("default", "task", "task-xyz"))
	// Newer look-alikes: the label without the ownership.
	for _, name := range []string{"web", "task"} {
		p := podOf("default", name, name+"-lookalike")
		p.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
		p.Spec.NodeName = "evil-node"
		h.addPod("", p)
	}
	d, _ := h.deployment("", "default", "web")
	j, _ := h.job("", "default", "task")

	t.Run("json", func(t *testing.T) {
		tests := []struct {
			arg  string
			want map[string]any
		}{
			{"web", map[string]any{
				"runtimeID": webID, "runtime": "k8s", "namespace": "default", "kind": "deployment", "name": "web",
				"uid": string(d.UID), "state": "created", "message": "deployment.apps/web created, service/web-svc",
				// an exposed deployment's address is its Service's DNS name
				"ipAddress": "web-svc.default.svc.cluster.local", "nodeName": "node-1", "podName": "web-abc",
				"podPhase": "Running", "image": "nginx:1.27", "ready": true, "restarts": float64(2), "inCluster": true,
				"reason": "", "exitCode": nil, "startedAt": nil, "finishedAt": nil, "podReason": "", "podMessage": "", "lastTermination": nil,
			}},
			{"job/task", map[string]any{
				"runtimeID": taskID, "runtime": "k8s", "namespace": "default", "kind": "job", "name": "task",
				"uid": string(j.UID), "state": "created", "message": "job.batch/task created",
				"ipAddress": "10.1.2.3", "nodeName": "node-1", "podName": "task-xyz",
				"podPhase": "Running", "image": "nginx:1.27", "ready": true, "restarts": float64(2), "inCluster": true,
				"reason": "", "exitCode": nil, "startedAt": nil, "finishedAt": nil, "podReason": "", "podMessage": "", "lastTermination": nil,
			}},
		}
		for _, tt := range tests {
			r := h.run("inspect", tt.arg, "-o", "json")
			checkExit(t, r, 0, "")
			var got map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			for _, k := range []string{"createdAt", "updatedAt"} {
				if _, ok := got[k]; !ok {
					t.Errorf("%s: no %s", tt.arg, k)
				}
				delete(got, k)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("inspect %s -o json (-want +got):\n%s", tt.arg, diff)
			}
		}
	})

	t.Run("readable", func(t *testing.T) {
		r := h.run("inspect", "web")
		checkExit(t, r, 0, "")
		got := map[string]string{}
		var keys []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("line %q is not KEY: VALUE", line)
			}
			keys = append(keys, k)
			got[k] = strings.TrimSpace(v)
		}
		wantKeys := []string{"Runtime ID", "Runtime", "Namespace", "Kind", "Name", "UID", "State", "Reason", "Exit code", "Message", "Created", "Updated",
			"In cluster", "IP address", "Node", "Pod", "Pod phase", "Image", "Ready", "Restarts"}
		if diff := cmp.Diff(wantKeys, keys); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
		for k, want := range map[string]string{"Runtime ID": webID, "IP address": "web-svc.default.svc.cluster.local", "Node": "node-1",
			"Pod": "web-abc", "Pod phase": "Running", "Ready": "true", "Restarts": "2", "State": "created", "In cluster": "true"} {
			if got[k] != want {
				t.Errorf("%s: %q, want %q", k, got[k], want)
			}
		}
	})

	t.Run("gone from the cluster", func(t *testing.T) {
		checkExit(t, h.run("stop", "task"), 0, "")
		r := h.run("inspect", "task", "-o", "yaml")
		checkExit(t, r, 0, "")
		var got InspectYAML
		if err := yaml.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatal(err)
		}
		// The image comes from the recorded spec when there is no pod.
		// The stop's read found the job gone: exited (stopped) at once.
		if diff := cmp.Diff(InspectYAML{RuntimeID: taskID, State: "exited", InCluster: false, Image: "busybox"}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

type InspectYAML struct {
	RuntimeID string `json:"runtimeID"`
	State     string `json:"state"`
	InCluster bool   `json:"inCluster"`
	Image     string `json:"image"`
	PodName   string `json:"podName"`
}

// seedPs records, sorted by namespace, kind and name:
// default|deployment|web (stopping), default|job|task (created),
// team-a|deployment|api (created), team-a|job|old (deleted).
func seedPs(t *testing.T, h *harness) {
	t.Helper()
	h.ok("create", "old", "--kind", "job", "--image", "busybox", "-n", "team-a")
	h.ok("create", "task", "--kind", "job", "--image", "busybox")
	h.ok("create", "web", "--image", "nginx:1.27")
	h.ok("create", "api", "--image", "nginx:1.27", "-n", "team-a")
	h.ok("delete", "job/old", "-n", "team-a")
	// A replica still running, as a controller would report until the
	// scale-down is done: the stop stays stopping.
	d, err := h.deployment("", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	d.Status.Replicas = 1
	if _, err := h.clusters[""].AppsV1().Deployments("default").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.ok("stop", "web")
}

func TestPs(t *testing.T) {
	h := newHarness(t)
	seedPs(t, h)
	const (
		web  = "k8s-default|deployment|web"
		task = "k8s-default|job|task"
		api  = "k8s-team-a|deployment|api"
		old  = "k8s-team-a|job|old"
	)
	tests := []struct {
		args     []string
		wantRows [][]string // columns but AGE (and UPDATED)
	}{
		{nil, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {web, "deployment", "stopping"}, {task, "job", "created"}, {api, "deployment", "created"}}},
		{[]string{"-a"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {web, "deployment", "stopping"}, {task, "job", "created"}, {api, "deployment", "created"}, {old, "job", "deleted"}}},
		{[]string{"--all"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {web, "deployment", "stopping"}, {task, "job", "created"}, {api, "deployment", "created"}, {old, "job", "deleted"}}},
		{[]string{"--state", "deleted"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {old, "job", "deleted"}}},
		{[]string{"--state", "created,stopping"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {web, "deployment", "stopping"}, {task, "job", "created"}, {api, "deployment", "created"}}},
		{[]string{"--state", "created", "--state", "deleted"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {task, "job", "created"}, {api, "deployment", "created"}, {old, "job", "deleted"}}},
		{[]string{"-n", "team-a"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {api, "deployment", "created"}}},
		{[]string{"-n", "team-a", "-a"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {api, "deployment", "created"}, {old, "job", "deleted"}}},
		{[]string{"-n", "team-a", "-A"}, [][]string{{"RUNTIME ID", "KIND", "STATE"}, {web, "deployment", "stopping"}, {task, "job", "created"}, {api, "deployment", "created"}}},
		{[]string{"--runtime", "k3s"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"ps"}, tt.args...), " "), func(t *testing.T) {
			r := h.run(append([]string{"ps"}, tt.args...)...)
			checkExit(t, r, 0, "")
			rows := table(r.stdout)
			var got [][]string
			for i, row := range rows {
				if len(row) != 4 {
					t.Fatalf("row %d has %d columns: %q", i, len(row), row)
				}
				got = append(got, row[:3])
			}
			if diff := cmp.Diff(tt.wantRows, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if len(rows) > 0 && rows[0][3] != "AGE" {
				t.Errorf("last header %q, want AGE", rows[0][3])
			}
			wantErr := ""
			if tt.wantRows == nil {
				wantErr = "No workloads found.\n"
			}
			if r.stderr != wantErr {
				t.Errorf("stderr %q, want %q", r.stderr, wantErr)
			}
		})
	}

	t.Run("wide", func(t *testing.T) {
		r := h.run("ps", "-o", "wide", "-a")
		checkExit(t, r, 0, "")
		rows := table(r.stdout)
		if diff := cmp.Diff([]string{"RUNTIME ID", "KIND", "STATE", "AGE", "RUNTIME", "NAMESPACE", "NAME", "UID", "UPDATED", "REASON", "EXIT CODE", "MESSAGE"}, rows[0]); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"RUNTIME ID", web, task, api, old}, column(rows, 0)); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"NAMESPACE", "default", "default", "team-a", "team-a"}, column(rows, 5)); diff != "" {
			t.Errorf("namespaces (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"MESSAGE", "scale to 0", "job.batch/task created", "deployment.apps/api created", "<none>"}, column(rows, 11)); diff != "" {
			t.Errorf("messages (-want +got):\n%s", diff)
		}
	})

	t.Run("name", func(t *testing.T) {
		r := h.run("ps", "-o", "name")
		checkExit(t, r, 0, "")
		if diff := cmp.Diff(strings.Join([]string{web, task, api}, "\n")+"\n", r.stdout); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := h.run("ps", "-a", "-o", format)
			checkExit(t, r, 0, "")
			var vs []view
			if err := yaml.Unmarshal([]byte(r.stdout), &vs); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.RuntimeID+" "+v.State)
			}
			if diff := cmp.Diff([]string{web + " stopping", task + " created", api + " created", old + " deleted"}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	t.Run("empty json is an empty array", func(t *testing.T) {
		r := h.run("ps", "-o", "json", "--state", "failed")
		checkExit(t, r, 0, "")
		if strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("stdout %q, want []", r.stdout)
		}
	})
}

func TestPsEmptyDatabase(t *testing.T) {
	h := newHarness(t)
	r := h.run("ps")
	checkExit(t, r, 0, "")
	if r.stdout != "" || r.stderr != "No workloads found.\n" {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if n := h.actions(); n != 0 {
		t.Errorf("ps made %d API requests", n)
	}
}

func TestEvents(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	h.ok("stop", "web")
	h.ok("stop", "task")
	h.ok("start", "web")
	h.ok("delete", "web")

	t.Run("json", func(t *testing.T) {
		r := h.run("events", "web", "-o", "json")
		checkExit(t, r, 0, "")
		var raw []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
			t.Fatal(err)
		}
		for _, e := range raw {
			var keys []string
			for k := range e {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if diff := cmp.Diff([]string{"exitCode", "finishedAt", "message", "reason", "runtimeID", "startedAt", "time", "type", "uid"}, keys); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		}
		evs := h.events("web")
		// Each request first, then what the engine's read confirmed at once.
		want := []string{"Created: create deployment.apps/web, service/web-svc", "StopRequested: scale to 0", "ContainerExited: 0",
			"StartRequested: scale to 1", "DeleteRequested: delete", "ContainerDeleted: "}
		if diff := cmp.Diff(want, h.history(webID)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		// The structured reasons: the stop's exit and the deletion.
		var reasons []string
		for _, e := range evs {
			reasons = append(reasons, e.Type+":"+e.Reason)
		}
		wantReasons := []string{"Created:", "StopRequested:", "ContainerExited:Stopped", "StartRequested:", "DeleteRequested:Deleted", "ContainerDeleted:Deleted"}
		if diff := cmp.Diff(wantReasons, reasons); diff != "" {
			t.Errorf("reasons (-want +got):\n%s", diff)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Time.Before(evs[i-1].Time) {
				t.Errorf("event %d (%v) is older than event %d (%v): want oldest first", i, evs[i].Time, i-1, evs[i-1].Time)
			}
		}
	})

	t.Run("several IDs interleaved oldest first", func(t *testing.T) {
		var got []string
		for _, e := range h.events(webID, "job/task") {
			got = append(got, e.RuntimeID+" "+e.Type)
		}
		want := []string{webID + " Created", taskID + " Created", webID + " StopRequested", webID + " ContainerExited",
			taskID + " StopRequested", taskID + " ContainerDeleted", webID + " StartRequested", webID + " DeleteRequested", webID + " ContainerDeleted"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("table", func(t *testing.T) {
		r := h.run("events", "task")
		checkExit(t, r, 0, "")
		rows := table(r.stdout)
		if diff := cmp.Diff([]string{"TIME", "RUNTIME ID", "TYPE", "REASON", "EXIT CODE", "UID", "MESSAGE"}, rows[0]); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"TYPE", "Created", "StopRequested", "ContainerDeleted"}, column(rows, 2)); diff != "" {
			t.Errorf("types (-want +got):\n%s", diff)
		}
	})
}

func TestVersion(t *testing.T) {
	t.Run("client json", func(t *testing.T) {
		h := newHarness(t)
		r := h.run("version", "--client", "-o", "json")
		checkExit(t, r, 0, "")
		var got map[string]string
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if diff := cmp.Diff([]string{"gitCommit", "goVersion", "platform", "version"}, keys); diff != "" {
			t.Errorf("fields (-want +got):\n%s", diff)
		}
		if got["goVersion"] != goruntime.Version() || got["platform"] != goruntime.GOOS+"/"+goruntime.GOARCH || !strings.HasPrefix(got["version"], "v") {
			t.Errorf("version info %v", got)
		}
		if n := h.actions(); n != 0 {
			t.Errorf("--client made %d API requests", n)
		}
		if r.stderr != "" {
			t.Errorf("stderr %q", r.stderr)
		}
		if _, exists := h.snapshot(); exists {
			t.Error("version created the state database")
		}
	})
	t.Run("server", func(t *testing.T) {
		h := newHarness(t)
		h.clusters[""].Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
		r := h.run("version")
		checkExit(t, r, 0, "")
		if !strings.Contains(r.stdout, "Client Version: v") || !strings.HasSuffix(r.stdout, "Server Version: v1.37.2\n") {
			t.Errorf("stdout %q", r.stdout)
		}
		if r.stderr != "" {
			t.Errorf("stderr %q", r.stderr)
		}
	})
	t.Run("server unreachable is a warning", func(t *testing.T) {
		h := newHarness(t)
		h.clusters[""].PrependReactor("get", "version", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		r := h.run("version", "-o", "json")
		checkExit(t, r, 0, "")
		var got map[string]string
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got["serverVersion"] != "" || !strings.Contains(got["serverError"], "connection refused") {
			t.Errorf("got %v", got)
		}
	})
}

func ptr[T any](v T) *T { return &v }
