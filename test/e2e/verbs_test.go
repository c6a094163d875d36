package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVerbs proves every verb of the plugin end to end on the real control plane: each subtest has
// a namespace of its own and asserts through the cluster (client-go), the plugin's output and exit
// codes, and the state database as `ps -o json` and `events -o json` show it.
//
// The subtests run in parallel; go test runs at most -parallel (GOMAXPROCS, 2 on the build machine)
// of them at once.
func TestVerbs(t *testing.T) {
	requireCluster(t)

	t.Run("create deployment with every spec field from flags", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		node := schedulableNode(t)
		id := createID(t, "create", "full", "-n", ns,
			"--image", "registry.invalid/web:1",
			"--kind", "deployment",
			"--entrypoint", "/bin/server", "--entrypoint", "serve",
			"--workdir", "/srv",
			"--env", "ZED=last", "-e", "ALPHA=first", "--env", "MID=a=b",
			"--cpu", "0.25",
			"--memory", "64Mi",
			"--volume", "/srv/data:/data",
			"--user", "1000:2000",
			"--port", "8080",
			"--expose",
			"--label", "team=platform",
			"--pull-policy", "Always",
			"--node-constraint", "hostname In "+node,
			"--node-constraint", "gpu DoesNotExist",
			"--", "arg1", "arg2")
		if want := "k8s-" + ns + "|deployment|full"; id != want {
			t.Fatalf("create printed ID %q, want %q", id, want)
		}
		checkFullDeployment(t, ns, "full", "registry.invalid/web:1", node)
		checkStartsOnNode(t, ns, id, "full", node)
	})

	t.Run("create deployment with every spec field from a spec file", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		node := schedulableNode(t)
		file := filepath.Join(t.TempDir(), "spec.yaml")
		writeFile(t, file, fmt.Sprintf(`# every field of a ContainerSpec
name: fromfile
image: registry.invalid/web:2
workloadKind: deployment
runtimeNamespace: %s
entrypoint: [/bin/server, serve]
command: [arg1, arg2]
workDir: /srv
env:
  ZED: last
  ALPHA: first
  MID: "a=b"
cpu: 0.25
memory: 67108864
volumes:
  - source: /srv/data
    target: /data
user: "1000:2000"
exposedPort: 8080
exposeService: true
labels:
  team: platform
pullPolicy: Always
schedulingConstraints:
  - type: node
    key: hostname
    operator: In
    values: [%s]
  - key: gpu
    operator: DoesNotExist
`, ns, node))
		// No -n: the namespace comes from the file's runtimeNamespace.
		id := createID(t, "create", "-f", file)
		if want := "k8s-" + ns + "|deployment|fromfile"; id != want {
			t.Fatalf("create -f printed ID %q, want %q", id, want)
		}
		checkFullDeployment(t, ns, "fromfile", "registry.invalid/web:2", node)
		checkStartsOnNode(t, ns, id, "fromfile", node)
	})

	t.Run("run job that completes then wait exited", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		r := runOK(t, "run", "once", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--timeout", "2m", "--", "echo", "hi")
		id := "k8s-" + ns + "|job|once"
		if r.stdout != id+"\n" {
			t.Fatalf("run printed %q, want the ID %q alone", r.stdout, id)
		}
		r = runOK(t, "wait", id, "--for=exited", "--timeout", "2m")
		if r.stdout != "job.batch/once condition met (exited)\n" {
			t.Errorf("wait printed %q", r.stdout)
		}
		job, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "once", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasJobCondition(job, batchv1.JobComplete) {
			t.Errorf("job conditions %v, want Complete", job.Status.Conditions)
		}
		if got := job.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, []string{"echo", "hi"}) {
			t.Errorf("job args = %q, want the command after --", got)
		}
		w := record(t, id)
		if w.State != "exited" || w.UID != string(job.UID) {
			t.Errorf("record state=%s uid=%s, want exited with the job's uid %s", w.State, w.UID, job.UID)
		}
		evs := events(t, id)
		requireSubsequence(t, evs, "Created", "StartRequested", "ContainerExited")
		last := evs[len(evs)-1]
		if last.Type != "ContainerExited" || last.Message != "0" || last.UID != string(job.UID) {
			t.Errorf("last event = %+v, want ContainerExited with message \"0\" about %s", last, job.UID)
		}
		// The structured result: a completed run with exit code 0, its start and finish.
		if w.Reason != "Completed" || w.ExitCode == nil || *w.ExitCode != 0 || w.StartedAt == nil || w.FinishedAt == nil || w.FinishedAt.Before(*w.StartedAt) {
			t.Errorf("record result: reason %q exit code %v started %v finished %v; want Completed, 0, a start and a finish after it",
				w.Reason, w.ExitCode, w.StartedAt, w.FinishedAt)
		}
		if last.Reason != "Completed" || last.ExitCode == nil || *last.ExitCode != 0 {
			t.Errorf("ContainerExited event: reason %q exit code %v; want Completed, 0", last.Reason, last.ExitCode)
		}
	})

	t.Run("ps inspect events", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		// run of a deployment prints the ID once it is running.
		r := runOK(t, "run", "web", "-n", ns, "--image", "registry.invalid/web:1", "--port", "80", "--expose", "--timeout", "2m")
		web := "k8s-" + ns + "|deployment|web"
		if r.stdout != web+"\n" {
			t.Fatalf("run printed %q, want the ID %q alone", r.stdout, web)
		}
		dep, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dep.Status.ReadyReplicas != 1 {
			t.Errorf("after run: readyReplicas = %d, want 1", dep.Status.ReadyReplicas)
		}
		if w := record(t, web); w.State != "running" {
			t.Errorf("after run: state %q, want running", w.State)
		}
		done := createID(t, "create", "done", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1")
		runOK(t, "wait", done, "--for=exited", "--timeout", "2m")

		// ps hides terminal workloads unless -a.
		if got := ids(psJSON(t, "-n", ns)); !slices.Equal(got, []string{web}) {
			t.Errorf("ps -o json = %v, want only %s", got, web)
		}
		all := psJSON(t, "-n", ns, "-a")
		if got := ids(all); !slices.Equal(got, []string{web, done}) {
			t.Errorf("ps -a -o json = %v, want %v (sorted by kind)", got, []string{web, done})
		}
		for _, w := range all {
			if w.Runtime != "k8s" || w.Namespace != ns || w.UID == "" || w.CreatedAt.IsZero() || w.UpdatedAt.IsZero() {
				t.Errorf("ps -a -o json record %+v: missing fields", w)
			}
		}
		if got := ids(psJSON(t, "-n", ns, "--state", "exited")); !slices.Equal(got, []string{done}) {
			t.Errorf("ps --state exited = %v, want %v", got, []string{done})
		}
		if got := ids(psJSON(t, "-n", ns, "--state", "running,exited")); !slices.Equal(got, []string{web, done}) {
			t.Errorf("ps --state running,exited = %v, want both", got)
		}
		if got := ids(psJSON(t, "-n", ns, "--state", "failed")); len(got) != 0 {
			t.Errorf("ps --state failed = %v, want none", got)
		}
		if r := runOK(t, "ps", "-n", ns, "-o", "name"); r.stdout != web+"\n" {
			t.Errorf("ps -o name = %q, want %q", r.stdout, web+"\n")
		}
		if r := runOK(t, "ps", "-n", ns, "-a", "-o", "name"); r.stdout != web+"\n"+done+"\n" {
			t.Errorf("ps -a -o name = %q", r.stdout)
		}
		r = runOK(t, "ps", "-n", ns)
		lines := nonEmptyLines(r.stdout)
		if len(lines) != 2 || !slices.Equal(strings.Fields(lines[0]), []string{"RUNTIME", "ID", "KIND", "STATE", "AGE"}) {
			t.Fatalf("ps table:\n%s", r.stdout)
		}
		if f := strings.Fields(lines[1]); len(f) != 4 || f[0] != web || f[1] != "deployment" || f[2] != "running" {
			t.Errorf("ps row %q, want %s deployment running AGE", lines[1], web)
		}
		r = runOK(t, "ps", "-n", ns, "-a", "-o", "wide")
		lines = nonEmptyLines(r.stdout)
		wantHeader := []string{"RUNTIME", "ID", "KIND", "STATE", "AGE", "RUNTIME", "NAMESPACE", "NAME", "UID", "UPDATED", "REASON", "EXIT", "CODE", "MESSAGE"}
		if len(lines) != 3 || !slices.Equal(strings.Fields(lines[0]), wantHeader) {
			t.Fatalf("ps -o wide:\n%s", r.stdout)
		}
		for i, w := range all {
			f := strings.Fields(lines[i+1])
			if len(f) < 9 || f[0] != w.RuntimeID || f[1] != w.Kind || f[2] != w.State || f[4] != "k8s" || f[5] != ns || f[6] != w.Name || f[7] != w.UID {
				t.Errorf("ps -o wide row %q does not match the record %+v", lines[i+1], w)
			}
		}

		// inspect -o json of an exposed deployment.
		var in inspectView
		decodeJSON(t, runOK(t, "inspect", web, "-o", "json"), &in)
		if want := "web-svc." + ns + ".svc.cluster.local"; in.IPAddress != want {
			t.Errorf("inspect ipAddress = %q, want %q", in.IPAddress, want)
		}
		if in.NodeName == "" || in.PodName == "" || !in.Ready || !in.InCluster || in.PodPhase != "Running" {
			t.Errorf("inspect = %+v, want a ready Running pod on a node, in the cluster", in)
		}
		if in.RuntimeID != web || in.State != "running" || in.UID != string(dep.UID) || in.Image != "registry.invalid/web:1" {
			t.Errorf("inspect record part = %+v", in.workloadView)
		}
		pod, err := client(t).CoreV1().Pods(ns).Get(t.Context(), in.PodName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("inspect podName %q: %v", in.PodName, err)
		}
		if pod.Labels["gobrave-workload"] != "web" || pod.Spec.NodeName != in.NodeName {
			t.Errorf("pod %s labels %v node %s; inspect says node %s", pod.Name, pod.Labels, pod.Spec.NodeName, in.NodeName)
		}
		// The kubectl-style reference resolves to the same workload.
		var in2 inspectView
		decodeJSON(t, runOK(t, "inspect", "deployment/web", "-n", ns, "-o", "json"), &in2)
		if in2.RuntimeID != web {
			t.Errorf("inspect deployment/web -n %s resolved to %q", ns, in2.RuntimeID)
		}

		// events -o json: oldest first, in order.
		evs := events(t, web)
		requireTypes(t, evs, "Created", "StartRequested", "ContainerStarted")
		for i, e := range evs {
			if e.RuntimeID != web || e.UID != string(dep.UID) {
				t.Errorf("event %d = %+v, want about %s uid %s", i, e, web, dep.UID)
			}
			if i > 0 && e.Time.Before(evs[i-1].Time) {
				t.Errorf("events not oldest first: %v before %v", evs[i-1].Time, e.Time)
			}
		}
		two := events(t, web, done)
		if len(two) != len(evs)+len(events(t, done)) {
			t.Errorf("events of two IDs: %d events, want %d", len(two), len(evs)+len(events(t, done)))
		}
	})

	t.Run("logs tail timestamps follow", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		id := createID(t, "create", "logger", "-n", ns, "--image", "registry.invalid/logger:1")
		runOK(t, "wait", id, "--for=started", "--timeout", "2m")
		var in inspectView
		decodeJSON(t, runOK(t, "inspect", id, "-o", "json"), &in)
		if in.PodName == "" {
			t.Fatalf("inspect shows no pod: %+v", in)
		}
		path := usePodLog(t, ns, in.PodName)
		sfx := randomSuffix(t)
		l1, l2, l3 := "line one "+sfx, "line two "+sfx, "line three "+sfx
		appendLog(t, path, l1, l2, l3)

		var last result
		waitFor(t, waitTimeout, func() (bool, error) {
			last = run(t, "logs", id, "--tail", "2")
			if last.code == 0 && last.stdout == l2+"\n"+l3+"\n" {
				return true, nil
			}
			return false, fmt.Errorf("logs --tail 2: exit code %d, stdout %q, stderr %q", last.code, last.stdout, last.stderr)
		})
		r := runOK(t, "logs", "deployment/logger", "-n", ns, "--tail", "-1")
		if want := fmt.Sprintf("gobrave-e2e: log of %s/%s\n%s\n%s\n%s\n", ns, in.PodName, l1, l2, l3); r.stdout != want {
			t.Errorf("logs --tail -1 = %q, want %q", r.stdout, want)
		}
		r = runOK(t, "logs", id, "--tail", "1", "--timestamps")
		m := regexp.MustCompile(`^(\S+) (.*)\n$`).FindStringSubmatch(r.stdout)
		if m == nil || m[2] != l3 {
			t.Fatalf("logs --tail 1 --timestamps = %q, want \"<time> %s\"", r.stdout, l3)
		}
		if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
			t.Errorf("logs --timestamps prefix %q is not an RFC 3339 time: %v", m[1], err)
		}

		// -f shows a line appended after the stream started.
		f := startPlugin(t, "logs", id, "-f", "--tail", "1")
		f.waitOutput(t, l3)
		l4 := "line four, appended while following " + sfx
		appendLog(t, path, l4)
		f.waitOutput(t, l4)
		if err := f.exited(); err != nil {
			t.Errorf("logs -f ended by itself: %v", err)
		}
		f.stop()
		if got := f.stdout(); got != l3+"\n"+l4+"\n" {
			t.Errorf("logs -f --tail 1 printed %q, want %q", got, l3+"\n"+l4+"\n")
		}
	})

	t.Run("stop start pause resume a deployment", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		id := createID(t, "create", "web", "-n", ns, "--image", "registry.invalid/web:1", "--port", "80", "--expose")
		runOK(t, "wait", id, "--for=started", "--timeout", "2m")
		uid := deploymentUID(t, ns, "web")

		steps := []struct {
			verb, past, state string
			replicas          int32
		}{
			{"stop", "stopped", "exited", 0},
			{"start", "started", "running", 1},
			{"pause", "paused", "exited", 0},
			{"resume", "resumed", "running", 1},
		}
		for _, s := range steps {
			r := runOK(t, s.verb, id, "--wait", "--timeout", "2m")
			if want := fmt.Sprintf("deployment.apps/web %s (%s)\n", s.past, id); r.stdout != want {
				t.Errorf("%s printed %q, want %q", s.verb, r.stdout, want)
			}
			d, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *d.Spec.Replicas != s.replicas {
				t.Errorf("after %s --wait: spec.replicas = %d, want %d", s.verb, *d.Spec.Replicas, s.replicas)
			}
			if s.replicas == 1 && d.Status.ReadyReplicas != 1 {
				t.Errorf("after %s --wait: readyReplicas = %d, want 1", s.verb, d.Status.ReadyReplicas)
			}
			if s.replicas == 0 && d.Status.Replicas != 0 {
				t.Errorf("after %s --wait: status.replicas = %d, want 0", s.verb, d.Status.Replicas)
			}
			if string(d.UID) != uid {
				t.Errorf("after %s: the deployment was replaced (uid %s, was %s)", s.verb, d.UID, uid)
			}
			if w := record(t, id); w.State != s.state || w.UID != uid {
				t.Errorf("after %s --wait: record state=%s uid=%s, want %s and %s", s.verb, w.State, w.UID, s.state, uid)
			}
		}
		// The Service is untouched by stop and start.
		if _, err := client(t).CoreV1().Services(ns).Get(t.Context(), "web-svc", metav1.GetOptions{}); err != nil {
			t.Errorf("service web-svc after stop/start: %v", err)
		}
		requireTypes(t, events(t, id),
			"Created", "ContainerStarted",
			"StopRequested", "ContainerExited",
			"StartRequested", "ContainerStarted",
			"PauseRequested", "ContainerExited",
			"ResumeRequested", "ContainerStarted")
	})

	t.Run("stop start pause resume a job", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		id := createID(t, "create", "held", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelHold+"=true")
		runOK(t, "wait", id, "--for=started", "--timeout", "2m")
		uids := []string{jobUID(t, ns, "held")}
		if w := record(t, id); w.State != "running" || w.UID != uids[0] {
			t.Fatalf("held job record state=%s uid=%s, want running and %s", w.State, w.UID, uids[0])
		}

		steps := []struct{ stop, start string }{{"stop", "start"}}
		for _, s := range steps {
			past := map[string]string{"stop": "stopped"}[s.stop]
			r := runOK(t, s.stop, id, "--wait", "--timeout", "2m")
			if want := fmt.Sprintf("job.batch/held %s (%s)\n", past, id); r.stdout != want {
				t.Errorf("%s printed %q, want %q", s.stop, r.stdout, want)
			}
			if _, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("after %s --wait: get job: %v, want NotFound", s.stop, err)
			}
			if w := record(t, id); w.State != "exited" || w.Message != "stopped" {
				t.Errorf("after %s --wait: record state=%s message=%q, want exited, \"stopped\"", s.stop, w.State, w.Message)
			}

			past = map[string]string{"start": "started"}[s.start]
			r = runOK(t, s.start, id, "--wait", "--timeout", "2m")
			if want := fmt.Sprintf("job.batch/held %s (%s)\n", past, id); r.stdout != want {
				t.Errorf("%s printed %q, want %q", s.start, r.stdout, want)
			}
			uid := jobUID(t, ns, "held")
			if slices.Contains(uids, uid) {
				t.Errorf("after %s: job uid %s is not new (earlier: %v)", s.start, uid, uids)
			}
			uids = append(uids, uid)
			waitPodRunning(t, ns, "job-name=held")
			if w := record(t, id); w.State != "running" || w.UID != uid {
				t.Errorf("after %s --wait: record state=%s uid=%s, want running and the new job's %s", s.start, w.State, w.UID, uid)
			}
		}
		// pause suspends the job: its pods go, the job stays; resume
		// unsuspends the same job.
		r := runOK(t, "pause", id, "--wait", "--timeout", "2m")
		if want := fmt.Sprintf("job.batch/held paused (%s)\n", id); r.stdout != want {
			t.Errorf("pause printed %q, want %q", r.stdout, want)
		}
		if w := record(t, id); w.State != "paused" || w.UID != uids[1] || w.Message != "suspended" {
			t.Errorf("after pause --wait: record state=%s uid=%s message=%q, want paused, %s, \"suspended\"", w.State, w.UID, w.Message, uids[1])
		}
		waitNoPods(t, ns, "job-name=held")
		if uid := jobUID(t, ns, "held"); uid != uids[1] {
			t.Errorf("after pause: job uid %s, want the same job %s", uid, uids[1])
		}
		r = runOK(t, "resume", id, "--wait", "--timeout", "2m")
		if want := fmt.Sprintf("job.batch/held resumed (%s)\n", id); r.stdout != want {
			t.Errorf("resume printed %q, want %q", r.stdout, want)
		}
		if uid := jobUID(t, ns, "held"); uid != uids[1] {
			t.Errorf("after resume: job uid %s, want the same job %s", uid, uids[1])
		}
		waitPodRunning(t, ns, "job-name=held")
		if w := record(t, id); w.State != "running" || w.UID != uids[1] {
			t.Errorf("after resume --wait: record state=%s uid=%s, want running and %s", w.State, w.UID, uids[1])
		}
		evs := events(t, id)
		requireTypes(t, evs,
			"Created", "ContainerStarted",
			"StopRequested", "ContainerDeleted",
			"StartRequested", "ContainerStarted",
			"PauseRequested", "ContainerPaused",
			"ResumeRequested", "ContainerStarted")
		if len(evs) == 10 {
			wantUIDs := []string{uids[0], uids[0], uids[0], uids[0], uids[1], uids[1], uids[1], uids[1], uids[1], uids[1]}
			for i, e := range evs {
				if e.UID != wantUIDs[i] {
					t.Errorf("event %d %s is about uid %s, want %s", i, e.Type, e.UID, wantUIDs[i])
				}
			}
		}
	})

	t.Run("delete and rm", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		web := createID(t, "create", "web", "-n", ns, "--image", "registry.invalid/web:1", "--port", "80", "--expose")
		job := createID(t, "create", "held", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelHold+"=true")
		runOK(t, "wait", web, job, "--for=started", "--timeout", "2m")
		if _, err := client(t).CoreV1().Services(ns).Get(t.Context(), "web-svc", metav1.GetOptions{}); err != nil {
			t.Fatalf("service web-svc before delete: %v", err)
		}
		webUID, jobUIDBefore := deploymentUID(t, ns, "web"), jobUID(t, ns, "held")

		r := runOK(t, "delete", web, "--wait", "--timeout", "2m")
		if want := fmt.Sprintf("deployment.apps/web deleted (%s)\n", web); r.stdout != want {
			t.Errorf("delete printed %q, want %q", r.stdout, want)
		}
		if _, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after delete --wait: get deployment: %v, want NotFound", err)
		}
		if _, err := client(t).CoreV1().Services(ns).Get(t.Context(), "web-svc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after delete --wait: get service web-svc: %v, want NotFound", err)
		}

		r = runOK(t, "rm", job, "--wait", "--timeout", "2m")
		if want := fmt.Sprintf("job.batch/held deleted (%s)\n", job); r.stdout != want {
			t.Errorf("rm printed %q, want %q", r.stdout, want)
		}
		if _, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after rm --wait: get job: %v, want NotFound", err)
		}
		pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 0 {
			t.Errorf("after delete and rm --wait: %d pods left in %s", len(pods.Items), ns)
		}

		// The records stay, in state deleted, with their history.
		if got := ids(psJSON(t, "-n", ns)); len(got) != 0 {
			t.Errorf("ps without -a lists deleted workloads: %v", got)
		}
		for id, uid := range map[string]string{web: webUID, job: jobUIDBefore} {
			w := record(t, id)
			if w.State != "deleted" || w.UID != uid {
				t.Errorf("record %s: state=%s uid=%s, want deleted and %s", id, w.State, w.UID, uid)
			}
			evs := events(t, id)
			requireTypes(t, evs, "Created", "ContainerStarted", "DeleteRequested", "ContainerDeleted")
			for _, e := range evs {
				if e.UID != uid {
					t.Errorf("event %+v of %s: uid is not the deleted object's %s", e, id, uid)
				}
			}
		}
		// inspect still shows the record; the object is gone.
		var in inspectView
		decodeJSON(t, runOK(t, "inspect", web, "-o", "json"), &in)
		if in.InCluster || in.State != "deleted" || in.PodName != "" {
			t.Errorf("inspect of a deleted workload = %+v", in)
		}
	})

	t.Run("job exit code 42 fails", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		id := createID(t, "create", "fail", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelExitCode+"=42")
		r := runOK(t, "wait", id, "--for=failed", "--timeout", "2m")
		if r.stdout != "job.batch/fail condition met (failed)\n" {
			t.Errorf("wait --for=failed printed %q", r.stdout)
		}
		// The cluster did fail it with 42.
		waitJobCondition(t, ns, "fail", batchv1.JobFailed)
		if code := terminatedExitCode(t, jobPod(t, ns, "fail")); code != 42 {
			t.Fatalf("pod exit code %d, want 42 (cluster problem)", code)
		}
		// Waiting for another terminal state fails at once, in one line.
		r = run(t, "wait", id, "--for=exited", "--timeout", "2m")
		if r.code != 1 || !strings.Contains(r.stderr, "failed") {
			t.Errorf("wait --for=exited on a failed job: %s, want exit 1 naming the failed state", r)
		}
		requireOneLineError(t, r)

		w := record(t, id)
		if w.State != "failed" {
			t.Errorf("record state %q, want failed", w.State)
		}
		evs := events(t, id)
		requireSubsequence(t, evs, "Created", "ContainerFailed")
		last := evs[len(evs)-1]
		if last.Type != "ContainerFailed" {
			t.Errorf("last event %+v, want ContainerFailed", last)
		}
		// The message must carry the container's exit code, e.g. "exit code 42 ...".
		t.Logf("failed job's message: %q", w.Message)
		if !strings.Contains(w.Message, "42") {
			t.Errorf("PLUGIN BUG: the failed job's message %q does not carry the exit code 42", w.Message)
		}
		if !strings.Contains(last.Message, "42") {
			t.Errorf("PLUGIN BUG: the ContainerFailed event's message %q does not carry the exit code 42", last.Message)
		}
		// And as structured fields, on the record and on the event.
		if w.Reason != "BackoffLimitExceeded" || w.ExitCode == nil || *w.ExitCode != 42 || w.StartedAt == nil || w.FinishedAt == nil || w.FinishedAt.Before(*w.StartedAt) {
			t.Errorf("record result: reason %q exit code %v started %v finished %v; want BackoffLimitExceeded, 42, a start and a finish after it",
				w.Reason, w.ExitCode, w.StartedAt, w.FinishedAt)
		}
		if last.Reason != "BackoffLimitExceeded" || last.ExitCode == nil || *last.ExitCode != 42 {
			t.Errorf("ContainerFailed event: reason %q exit code %v; want BackoffLimitExceeded, 42", last.Reason, last.ExitCode)
		}
	})

	t.Run("run of a failing job exits 1", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		r := run(t, "run", "boom", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelExitCode+"=3", "--timeout", "2m")
		id := "k8s-" + ns + "|job|boom"
		if r.code != 1 {
			t.Fatalf("run of a job that fails: %s, want exit code 1; events then: %+v", r, events(t, id))
		}
		requireOneLineError(t, r)
		if !strings.Contains(r.stderr, "failed") {
			t.Errorf("run error %q does not say it failed", r.stderr)
		}
		if w := record(t, id); w.State != "failed" {
			t.Errorf("record state %q, want failed", w.State)
		}
		waitJobCondition(t, ns, "boom", batchv1.JobFailed)
	})

	t.Run("job whose pod cannot be scheduled has not started", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		// No node has the label gpu: the pod stays Pending, its container never runs.
		id := createID(t, "create", "pending", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--node-constraint", "gpu Exists")
		waitFor(t, waitTimeout, func() (bool, error) {
			pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=pending"})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && p.Status.Phase == corev1.PodPending {
						return true, nil
					}
				}
			}
			return false, fmt.Errorf("no unschedulable Pending pod among %d", len(pods.Items))
		})
		r := run(t, "wait", id, "--for=started", "--timeout", "3s")
		if r.code != 1 {
			t.Errorf("PLUGIN BUG: wait --for=started on a job whose only pod is Pending (unschedulable): %s, want exit code 1 (timed out)", r)
		}
		if w := record(t, id); w.State == "running" {
			t.Errorf("PLUGIN BUG: a job whose pod is Pending and unscheduled is recorded as running; events %+v", events(t, id))
		} else if w.Reason != "Unschedulable" || !strings.Contains(r.stderr, "Unschedulable: 0/") {
			t.Errorf("record reason %q and wait error %q, want Unschedulable with the scheduler's message", w.Reason, r.stderr)
		}
	})

	t.Run("pull policy Never is refused", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		env := isolatedStore(t, ns)
		before := snapshot(t, ns, env)
		file := filepath.Join(t.TempDir(), "never.yaml")
		writeFile(t, file, "name: never\nimage: registry.invalid/web:1\npullPolicy: Never\n")
		for _, args := range [][]string{
			{"create", "never", "-n", ns, "--image", "registry.invalid/web:1", "--pull-policy", "Never"},
			{"run", "never", "-n", ns, "--image", "registry.invalid/web:1", "--pull-policy", "Never"},
			{"create", "never", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--pull-policy", "Never"},
			{"create", "-n", ns, "-f", file},
		} {
			r := runWith(t, runOpts{env: env}, args...)
			if r.code != 2 {
				t.Errorf("%q: %s, want exit code 2", args, r)
				continue
			}
			requireOneLineError(t, r)
			if !strings.Contains(r.stderr, "Never") {
				t.Errorf("%q: error %q does not name the pull policy Never", args, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("%q printed %q on stdout", args, r.stdout)
			}
		}
		deps, err := client(t).AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(deps.Items) != 0 {
			t.Errorf("%d deployments in %s after the refusal", len(deps.Items), ns)
		}
		after := snapshot(t, ns, env)
		before.requireEqual(t, after)

		// Refused before the state database is even opened.
		home := t.TempDir()
		r := runWith(t, runOpts{env: []string{"GOBRAVE_HOME=" + home}}, "create", "never", "-n", ns, "--image", "registry.invalid/web:1", "--pull-policy", "Never")
		if r.code != 2 {
			t.Errorf("with an empty GOBRAVE_HOME: %s, want exit code 2", r)
		}
		if entries, _ := os.ReadDir(home); len(entries) != 0 {
			t.Errorf("a refused create wrote to the empty GOBRAVE_HOME: %v", entries)
		}
	})

	t.Run("bad inputs change nothing", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		env := isolatedStore(t, ns)
		before := snapshot(t, ns, env)
		dir := t.TempDir()
		unknownField := filepath.Join(dir, "unknown-field.yaml")
		writeFile(t, unknownField, "name: bad\nimage: registry.invalid/web:1\nreplicas: 3\n")
		badYAML := filepath.Join(dir, "bad.yaml")
		writeFile(t, badYAML, "name: bad\nimage: [registry.invalid/web:1\n")
		badConfig := filepath.Join(dir, "config.yaml")
		writeFile(t, badConfig, "runtimes:\n  docker: {namespace: "+ns+"}\n")
		img := "registry.invalid/web:1"
		cases := []struct {
			name string
			args []string
		}{
			{"name not a DNS label", []string{"create", "Bad_Name", "--image", img}},
			{"negative cpu", []string{"create", "bad", "--image", img, "--cpu", "-1"}},
			{"memory not a quantity", []string{"create", "bad", "--image", img, "--memory", "lots"}},
			{"relative volume source", []string{"create", "bad", "--image", img, "--volume", "relative:/data"}},
			{"user not numeric", []string{"create", "bad", "--image", img, "--user", "alice"}},
			{"reserved label", []string{"create", "bad", "--image", img, "--label", "app=mine"}},
			{"expose on a job", []string{"create", "bad", "--kind", "job", "--image", img, "--port", "80", "--expose"}},
			{"expose without port", []string{"create", "bad", "--image", img, "--expose"}},
			{"unknown constraint operator", []string{"create", "bad", "--image", img, "--node-constraint", "gpu Near yes"}},
			{"bad env name", []string{"create", "bad", "--image", img, "--env", "1BAD=x"}},
			{"unknown kind", []string{"create", "bad", "--image", img, "--kind", "cronjob"}},
			{"no image", []string{"create", "bad"}},
			{"two names", []string{"create", "bad", "worse", "--image", img}},
			{"unknown pull policy", []string{"create", "bad", "--image", img, "--pull-policy", "Sometimes"}},
			{"port out of range", []string{"run", "bad", "--image", img, "--port", "70000"}},
			{"zero run timeout", []string{"run", "bad", "--image", img, "--timeout", "0s"}},
			{"unknown flag", []string{"create", "bad", "--image", img, "--replicas", "3"}},
			{"spec file with an unknown field", []string{"create", "-f", unknownField}},
			{"spec file with bad YAML", []string{"create", "-f", badYAML}},
			{"unknown runtime", []string{"create", "bad", "--image", img, "--runtime", "docker"}},
			{"config file with an unknown runtime", []string{"create", "bad", "--image", img, "--config", badConfig}},
			{"bad runtime ID kind", []string{"stop", "k8s-" + ns + "|pod|bad"}},
			{"bad kind/name reference", []string{"delete", "deployment/Bad_Name"}},
			{"start without an ID", []string{"start"}},
			{"unknown ps state", []string{"ps", "--state", "sleeping"}},
			{"unknown wait condition", []string{"wait", "job/seed", "--for=ready"}},
			{"negative logs tail", []string{"logs", "job/seed", "--tail", "-5"}},
			{"unknown inspect output", []string{"inspect", "job/seed", "-o", "table"}},
			{"events without an ID", []string{"events"}},
			{"monitor with IDs and --all", []string{"monitor", "job/seed", "--all"}},
		}
		for _, c := range cases {
			args := append(append([]string{}, c.args...), "-n", ns)
			r := runWith(t, runOpts{env: env}, args...)
			if r.code != 2 {
				t.Errorf("%s (%q): %s, want exit code 2", c.name, args, r)
				continue
			}
			if !strings.HasPrefix(r.stderr, "error: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s (%q): stderr %q, want one line \"error: ...\"", c.name, args, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("%s (%q): stdout %q, want nothing", c.name, args, r.stdout)
			}
		}
		after := snapshot(t, ns, env)
		before.requireEqual(t, after)
	})

	t.Run("two runtime profiles", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		current := strings.TrimSpace(kubectl(t, "config", "current-context").stdout)
		if current == "" || current == "gobrave-k3s" {
			t.Fatalf("current context %q", current)
		}
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.yaml")
		writeFile(t, cfg, fmt.Sprintf("defaultRuntime: k8s\nruntimes:\n  k8s: {context: %q, namespace: %s}\n  k3s: {context: gobrave-k3s, namespace: %s}\n", current, ns, ns))

		// No -n: the profile's namespace.
		k8sID := createID(t, "create", "onk8s", "--config", cfg, "--image", "registry.invalid/web:1")
		k3sID := createID(t, "create", "onk3s", "--config", cfg, "--runtime", "k3s", "--image", "registry.invalid/web:1")
		if want := "k8s-" + ns + "|deployment|onk8s"; k8sID != want {
			t.Errorf("k8s ID %q, want %q", k8sID, want)
		}
		if want := "k3s-" + ns + "|deployment|onk3s"; k3sID != want || !strings.HasPrefix(k3sID, "k3s-") {
			t.Errorf("k3s ID %q, want %q", k3sID, want)
		}
		runOK(t, "wait", k8sID, k3sID, "--for=started", "--config", cfg, "--timeout", "2m")
		if w := record(t, k3sID); w.Runtime != "k3s" || w.Namespace != ns || w.State != "running" {
			t.Errorf("k3s record %+v", w)
		}

		// ps --runtime k3s lists only it (no other test uses k3s).
		if got := ids(psJSON(t, "--config", cfg, "--runtime", "k3s", "-a")); !slices.Equal(got, []string{k3sID}) {
			t.Errorf("ps --runtime k3s -a = %v, want only %s", got, k3sID)
		}
		if got := ids(psJSON(t, "--config", cfg, "--runtime", "k8s", "-a", "-n", ns)); !slices.Equal(got, []string{k8sID}) {
			t.Errorf("ps --runtime k8s -a -n %s = %v, want only %s", ns, got, k8sID)
		}
		// kind/NAME with --runtime k3s resolves to the k3s record.
		var in inspectView
		decodeJSON(t, runOK(t, "inspect", "deployment/onk3s", "--config", cfg, "--runtime", "k3s", "-o", "json"), &in)
		if in.RuntimeID != k3sID || !in.InCluster {
			t.Errorf("inspect deployment/onk3s --runtime k3s = %+v", in)
		}

		// The ID's runtime picks the context: with k3s pointing at a context that does not exist,
		// acting on the k3s ID fails and the k8s ID still works.
		broken := filepath.Join(dir, "broken.yaml")
		writeFile(t, broken, fmt.Sprintf("runtimes:\n  k8s: {context: %q, namespace: %s}\n  k3s: {context: gobrave-missing, namespace: %s}\n", current, ns, ns))
		r := run(t, "stop", k3sID, "--config", broken)
		if r.code == 0 || !strings.Contains(r.stderr, "gobrave-missing") {
			t.Errorf("stop of the k3s ID with its context missing: %s, want a failure naming gobrave-missing", r)
		}
		runOK(t, "inspect", k8sID, "--config", broken, "-o", "json")
		if d := getDeployment(t, ns, "onk3s"); *d.Spec.Replicas != 1 {
			t.Errorf("after the failed stop: deployment onk3s has replicas %d, want 1", *d.Spec.Replicas)
		}
		if w := record(t, k3sID); w.State != "running" {
			t.Errorf("after the failed stop: k3s record state %q, want running (unchanged)", w.State)
		}

		// stop and start act on it without --runtime.
		r = runOK(t, "stop", k3sID, "--config", cfg, "--wait", "--timeout", "2m")
		if want := fmt.Sprintf("deployment.apps/onk3s stopped (%s)\n", k3sID); r.stdout != want {
			t.Errorf("stop printed %q, want %q", r.stdout, want)
		}
		if d := getDeployment(t, ns, "onk3s"); *d.Spec.Replicas != 0 {
			t.Errorf("after stop: onk3s replicas %d, want 0", *d.Spec.Replicas)
		}
		if d := getDeployment(t, ns, "onk8s"); *d.Spec.Replicas != 1 {
			t.Errorf("stop of the k3s ID scaled onk8s to %d", *d.Spec.Replicas)
		}
		if w := record(t, k3sID); w.State != "exited" {
			t.Errorf("after stop: k3s record state %q, want exited", w.State)
		}
		runOK(t, "start", k3sID, "--config", cfg, "--wait", "--timeout", "2m")
		if d := getDeployment(t, ns, "onk3s"); *d.Spec.Replicas != 1 || d.Status.ReadyReplicas != 1 {
			t.Errorf("after start: onk3s replicas %d ready %d, want 1 and 1", *d.Spec.Replicas, d.Status.ReadyReplicas)
		}
		if w := record(t, k3sID); w.State != "running" {
			t.Errorf("after start: k3s record state %q, want running", w.State)
		}
		requireTypes(t, events(t, k3sID), "Created", "ContainerStarted", "StopRequested", "ContainerExited", "StartRequested", "ContainerStarted")
	})

	t.Run("version shows the server", func(t *testing.T) {
		t.Parallel()
		var v struct {
			Version       string `json:"version"`
			GitCommit     string `json:"gitCommit"`
			GoVersion     string `json:"goVersion"`
			Platform      string `json:"platform"`
			ServerVersion string `json:"serverVersion"`
			ServerError   string `json:"serverError"`
		}
		decodeJSON(t, runOK(t, "version", "-o", "json"), &v)
		if v.ServerVersion != "v1.37.2" || v.ServerError != "" {
			t.Errorf("version -o json: serverVersion %q (error %q), want v1.37.2", v.ServerVersion, v.ServerError)
		}
		if v.Version == "" || v.GoVersion == "" || v.Platform == "" {
			t.Errorf("version -o json = %+v, want version, goVersion and platform", v)
		}
		var c map[string]any
		decodeJSON(t, runOK(t, "version", "--client", "-o", "json"), &c)
		if _, ok := c["serverVersion"]; ok {
			t.Errorf("version --client -o json has a serverVersion: %v", c)
		}
	})

	t.Run("same name again", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		id := createID(t, "create", "web", "-n", ns, "--image", "registry.invalid/web:1", "--port", "80", "--expose")
		runOK(t, "wait", id, "--for=started", "--timeout", "2m")
		oldUID := deploymentUID(t, ns, "web")
		runOK(t, "delete", id, "--wait", "--timeout", "2m")
		oldHistory := events(t, id)

		again := createID(t, "create", "web", "-n", ns, "--image", "registry.invalid/web:2", "--port", "80", "--expose")
		if again != id {
			t.Fatalf("second create printed %q, want the same ID %q", again, id)
		}
		runOK(t, "wait", id, "--for=started", "--timeout", "2m")
		newUID := deploymentUID(t, ns, "web")
		if newUID == oldUID {
			t.Fatalf("the deployment kept uid %s", oldUID)
		}
		if _, err := client(t).CoreV1().Services(ns).Get(t.Context(), "web-svc", metav1.GetOptions{}); err != nil {
			t.Errorf("service web-svc after the second create: %v", err)
		}
		recs := psJSON(t, "-n", ns, "-a")
		if len(recs) != 1 || recs[0].RuntimeID != id || recs[0].UID != newUID || recs[0].State != "running" {
			t.Fatalf("ps -a -n %s = %+v, want one running record with the new uid %s", ns, recs, newUID)
		}

		evs := events(t, id)
		if len(evs) < len(oldHistory) {
			t.Fatalf("history shrank: %d events, was %d", len(evs), len(oldHistory))
		}
		for i, e := range oldHistory {
			if evs[i] != e {
				t.Errorf("old event %d changed: %+v, was %+v", i, evs[i], e)
			}
			if e.UID != oldUID {
				t.Errorf("old event %d %+v is not about the old uid %s", i, e, oldUID)
			}
		}
		requireTypes(t, oldHistory, "Created", "ContainerStarted", "DeleteRequested", "ContainerDeleted")
		requireTypes(t, evs[len(oldHistory):], "Created", "ContainerStarted")
		for _, e := range evs[len(oldHistory):] {
			if e.UID != newUID {
				t.Errorf("new event %+v is not about the new uid %s", e, newUID)
			}
		}
	})
}

// workloadView is a record as `ps -o json` prints it (docs/output.md).
type workloadView struct {
	RuntimeID string `json:"runtimeID"`
	Runtime   string `json:"runtime"`
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	State     string `json:"state"`
	Message   string `json:"message"`
	// The structured result (docs/output.md).
	Reason     string     `json:"reason"`
	ExitCode   *int32     `json:"exitCode"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}

// inspectView is what `inspect -o json` prints.
type inspectView struct {
	workloadView
	IPAddress string `json:"ipAddress"`
	NodeName  string `json:"nodeName"`
	PodName   string `json:"podName"`
	PodPhase  string `json:"podPhase"`
	Image     string `json:"image"`
	Ready     bool   `json:"ready"`
	Restarts  int32  `json:"restarts"`
	// Why the newest pod does not run, and how its container last ended.
	PodReason       string `json:"podReason"`
	PodMessage      string `json:"podMessage"`
	LastTermination *struct {
		ExitCode   int32     `json:"exitCode"`
		Reason     string    `json:"reason"`
		StartedAt  time.Time `json:"startedAt"`
		FinishedAt time.Time `json:"finishedAt"`
	} `json:"lastTermination"`
	InCluster bool `json:"inCluster"`
}

// eventView is one element of `events -o json`.
type eventView struct {
	RuntimeID string    `json:"runtimeID"`
	Type      string    `json:"type"`
	Message   string    `json:"message"`
	UID       string    `json:"uid"`
	Time      time.Time `json:"time"`
	// The event's structured result.
	Reason     string     `json:"reason"`
	ExitCode   *int32     `json:"exitCode"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

func decodeJSON(t testing.TB, r result, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode JSON: %v\n%s", err, r)
	}
}

// createID runs a create (or run) that must succeed and returns the runtime ID it printed alone.
func createID(t testing.TB, args ...string) string {
	t.Helper()
	r := runOK(t, args...)
	id := strings.TrimSuffix(r.stdout, "\n")
	if id == "" || strings.ContainsAny(id, "\n \t") || !strings.HasSuffix(r.stdout, "\n") {
		t.Fatalf("kubectl gobrave %s printed %q, want one runtime ID and a newline", strings.Join(args, " "), r.stdout)
	}
	return id
}

func psJSON(t testing.TB, args ...string) []workloadView {
	t.Helper()
	var ws []workloadView
	decodeJSON(t, runOK(t, append([]string{"ps", "-o", "json"}, args...)...), &ws)
	return ws
}

func ids(ws []workloadView) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.RuntimeID)
	}
	return out
}

// record returns the record of id, whatever its state, as `ps -a -o json` shows it.
func record(t testing.TB, id string) workloadView {
	t.Helper()
	ns := strings.SplitN(strings.SplitN(id, "|", 2)[0], "-", 2)[1]
	for _, w := range psJSON(t, "-a", "-n", ns) {
		if w.RuntimeID == id {
			return w
		}
	}
	t.Fatalf("%s is not in ps -a -n %s -o json", id, ns)
	return workloadView{}
}

func events(t testing.TB, ids ...string) []eventView {
	t.Helper()
	var evs []eventView
	decodeJSON(t, runOK(t, append([]string{"events", "-o", "json"}, ids...)...), &evs)
	return evs
}

func types(evs []eventView) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// requireTypes checks the event types, in order, exactly.
func requireTypes(t testing.TB, evs []eventView, want ...string) {
	t.Helper()
	if got := types(evs); !slices.Equal(got, want) {
		t.Errorf("event types %v, want %v\nevents: %+v", got, want, evs)
	}
}

// requireSubsequence checks that the event types contain want in that order.
func requireSubsequence(t testing.TB, evs []eventView, want ...string) {
	t.Helper()
	i := 0
	for _, e := range evs {
		if i < len(want) && e.Type == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("event types %v do not contain %v in order\nevents: %+v", types(evs), want, evs)
	}
}

func requireOneLineError(t testing.TB, r result) {
	t.Helper()
	if !strings.HasPrefix(r.stderr, "error: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr %q, want one line \"error: <what> (<hint>)\"", r.stderr)
	}
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func hasJobCondition(j *batchv1.Job, want batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == want && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func getDeployment(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment %s/%s: %v", ns, name, err)
	}
	return d
}

func deploymentUID(t testing.TB, ns, name string) string {
	t.Helper()
	return string(getDeployment(t, ns, name).UID)
}

func jobUID(t testing.TB, ns, name string) string {
	t.Helper()
	j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get job %s/%s: %v", ns, name, err)
	}
	return string(j.UID)
}

// schedulableNode returns the name of the last Ready node, which carries kubernetes.io/hostname
// with its own name, so "hostname In NAME" places a pod on it.
func schedulableNode(t testing.TB) string {
	t.Helper()
	nodes, err := client(t).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if ready && n.Labels["kubernetes.io/hostname"] == n.Name && !n.Spec.Unschedulable {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		t.Fatalf("no Ready node labelled kubernetes.io/hostname=<its name> among %d", len(nodes.Items))
	}
	slices.Sort(names)
	return names[len(names)-1]
}

// checkFullDeployment checks the objects made from the spec with every field (see the two
// "every spec field" subtests).
func checkFullDeployment(t *testing.T, ns, name, image, node string) {
	t.Helper()
	d := getDeployment(t, ns, name)
	wantLabels := map[string]string{"app": name, "gobrave-workload": name, "team": "platform"}
	if !mapsEqual(d.Labels, wantLabels) {
		t.Errorf("deployment labels %v, want %v", d.Labels, wantLabels)
	}
	if d.Annotations["gobrave.dev/spec"] == "" {
		t.Errorf("deployment has no gobrave.dev/spec annotation: %v", d.Annotations)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", d.Spec.Replicas)
	}
	if sel := d.Spec.Selector.MatchLabels; !mapsEqual(sel, map[string]string{"gobrave-workload": name}) {
		t.Errorf("selector %v", sel)
	}
	tmpl := d.Spec.Template
	wantPodLabels := map[string]string{"app": name, "gobrave-workload": name, "team": "platform", "gobrave.dev/kind": "deployment"}
	if !mapsEqual(tmpl.Labels, wantPodLabels) {
		t.Errorf("pod template labels %v, want %v", tmpl.Labels, wantPodLabels)
	}
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("restartPolicy %s", tmpl.Spec.RestartPolicy)
	}
	if len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(tmpl.Spec.Containers))
	}
	c := tmpl.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("image %q, want %q", c.Image, image)
	}
	if !slices.Equal(c.Command, []string{"/bin/server", "serve"}) || !slices.Equal(c.Args, []string{"arg1", "arg2"}) {
		t.Errorf("command %q args %q, want the entrypoint and the command", c.Command, c.Args)
	}
	if c.WorkingDir != "/srv" {
		t.Errorf("workingDir %q", c.WorkingDir)
	}
	wantEnv := []corev1.EnvVar{{Name: "ALPHA", Value: "first"}, {Name: "MID", Value: "a=b"}, {Name: "ZED", Value: "last"}}
	if !slices.Equal(c.Env, wantEnv) {
		t.Errorf("env %v, want sorted %v", c.Env, wantEnv)
	}
	for what, rl := range map[string]corev1.ResourceList{"limits": c.Resources.Limits, "requests": c.Resources.Requests} {
		cpu, mem := rl[corev1.ResourceCPU], rl[corev1.ResourceMemory]
		if cpu.Cmp(resource.MustParse("250m")) != 0 || mem.Cmp(resource.MustParse("64Mi")) != 0 || len(rl) != 2 {
			t.Errorf("%s %v, want cpu 250m and memory 64Mi", what, rl)
		}
	}
	if len(tmpl.Spec.Volumes) != 1 || tmpl.Spec.Volumes[0].HostPath == nil || tmpl.Spec.Volumes[0].HostPath.Path != "/srv/data" {
		t.Errorf("volumes %+v, want one hostPath /srv/data", tmpl.Spec.Volumes)
	} else if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/data" || c.VolumeMounts[0].Name != tmpl.Spec.Volumes[0].Name {
		t.Errorf("volumeMounts %+v, want %s at /data", c.VolumeMounts, tmpl.Spec.Volumes[0].Name)
	}
	if sc := c.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.RunAsGroup == nil || *sc.RunAsGroup != 2000 {
		t.Errorf("securityContext %+v, want runAsUser 1000 runAsGroup 2000", sc)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 || c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want 8080/TCP", c.Ports)
	}
	if c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("imagePullPolicy %q, want Always", c.ImagePullPolicy)
	}
	aff := tmpl.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("affinity %+v, want required node affinity", aff)
	} else {
		terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		want := []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}},
			{Key: "gpu", Operator: corev1.NodeSelectorOpDoesNotExist},
		}
		if len(terms) != 1 || !nodeRequirementsEqual(terms[0].MatchExpressions, want) {
			t.Errorf("node selector terms %+v, want one term %+v", terms, want)
		}
	}

	svc, err := client(t).CoreV1().Services(ns).Get(t.Context(), name+"-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("service %s-svc: %v", name, err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || !mapsEqual(svc.Spec.Selector, map[string]string{"gobrave-workload": name, "gobrave.dev/kind": "deployment"}) {
		t.Errorf("service type %s selector %v, want ClusterIP selecting gobrave-workload=%s,gobrave.dev/kind=deployment", svc.Spec.Type, svc.Spec.Selector, name)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("service ports %+v, want 8080 -> 8080", svc.Spec.Ports)
	}
	if !mapsEqual(svc.Labels, wantLabels) {
		t.Errorf("service labels %v, want %v", svc.Labels, wantLabels)
	}
}

// checkStartsOnNode waits with the plugin until the workload has started and checks it landed on node.
func checkStartsOnNode(t *testing.T, ns, id, name, node string) {
	t.Helper()
	r := runOK(t, "wait", id, "--for=started", "--timeout", "2m")
	if want := "deployment.apps/" + name + " condition met (started)\n"; r.stdout != want {
		t.Errorf("wait printed %q, want %q", r.stdout, want)
	}
	if d := getDeployment(t, ns, name); d.Status.ReadyReplicas != 1 {
		t.Errorf("readyReplicas %d after wait --for=started", d.Status.ReadyReplicas)
	}
	w := record(t, id)
	if w.State != "running" || w.UID != deploymentUID(t, ns, name) {
		t.Errorf("record %+v, want running with the deployment's uid", w)
	}
	var in inspectView
	decodeJSON(t, runOK(t, "inspect", id, "-o", "json"), &in)
	if in.NodeName != node || !in.Ready {
		t.Errorf("inspect node %q ready %v, want %q and ready (hostname In %s)", in.NodeName, in.Ready, node, node)
	}
	if want := name + "-svc." + ns + ".svc.cluster.local"; in.IPAddress != want {
		t.Errorf("inspect ipAddress %q, want %q", in.IPAddress, want)
	}
	requireTypes(t, events(t, id), "Created", "ContainerStarted")
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func nodeRequirementsEqual(a, b []corev1.NodeSelectorRequirement) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.NodeSelectorRequirement) bool {
		return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
	})
}

// isolatedStore gives a test a state database of its own (GOBRAVE_HOME in a temp folder) with one
// record in it, a held job "seed" in ns, and returns the environment for runWith. The shared
// database changes under parallel tests; this one changes only when this test changes it.
func isolatedStore(t *testing.T, ns string) []string {
	t.Helper()
	env := []string{"GOBRAVE_HOME=" + t.TempDir()}
	r := runWith(t, runOpts{env: env}, "create", "seed", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelHold+"=true")
	if r.code != 0 {
		t.Fatalf("create the seed record: %s", r)
	}
	return env
}

// stateSnapshot is what a test may not change: the objects the plugin makes in a namespace and
// the state database as ps and events show it.
type stateSnapshot struct {
	objects []string
	ps      string
	events  string
}

func snapshot(t *testing.T, ns string, env []string) stateSnapshot {
	t.Helper()
	c := client(t)
	var s stateSnapshot
	deps, err := c.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range deps.Items {
		s.objects = append(s.objects, fmt.Sprintf("deployment/%s %s", o.Name, o.UID))
	}
	jobs, err := c.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range jobs.Items {
		s.objects = append(s.objects, fmt.Sprintf("job/%s %s", o.Name, o.UID))
	}
	svcs, err := c.CoreV1().Services(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range svcs.Items {
		s.objects = append(s.objects, fmt.Sprintf("service/%s %s", o.Name, o.UID))
	}
	slices.Sort(s.objects)
	ps := runWith(t, runOpts{env: env}, "ps", "-a", "-o", "json")
	if ps.code != 0 {
		t.Fatalf("ps -a -o json: %s", ps)
	}
	s.ps = ps.stdout
	var ws []workloadView
	decodeJSON(t, ps, &ws)
	args := []string{"events", "-o", "json"}
	for _, w := range ws {
		args = append(args, w.RuntimeID)
	}
	if len(ws) > 0 {
		ev := runWith(t, runOpts{env: env}, args...)
		if ev.code != 0 {
			t.Fatalf("events -o json: %s", ev)
		}
		s.events = ev.stdout
	}
	return s
}

func (s stateSnapshot) requireEqual(t *testing.T, after stateSnapshot) {
	t.Helper()
	if !slices.Equal(s.objects, after.objects) {
		t.Errorf("objects in the namespace changed:\nbefore %v\nafter  %v", s.objects, after.objects)
	}
	if s.ps != after.ps {
		t.Errorf("ps -a -o json changed:\nbefore %s\nafter  %s", s.ps, after.ps)
	}
	if s.events != after.events {
		t.Errorf("events -o json changed:\nbefore %s\nafter  %s", s.events, after.events)
	}
}

// plugin is a `kubectl gobrave` started in the background (logs -f), with its output collected.
type plugin struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    *syncBuffer
	errOut *syncBuffer
	done   chan struct{}
	err    error
}

// startPlugin starts `kubectl gobrave args...` with the suite's environment, as run does, and
// stops it when the test ends.
func startPlugin(t *testing.T, args ...string) *plugin {
	t.Helper()
	requireCluster(t)
	if harness.pluginErr != nil {
		t.Fatalf("kubectl-gobrave was not built: %v", harness.pluginErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	p := &plugin{cancel: cancel, out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, "kubectl", append([]string{"gobrave"}, args...)...)
	p.cmd.Env = os.Environ()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errOut
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start kubectl gobrave %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *plugin) stdout() string { return p.out.String() }

// exited returns an error describing the end of the process once it has ended, else nil.
func (p *plugin) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("exited (%v)\nstdout:\n%s\nstderr:\n%s", p.err, p.out, p.errOut)
	default:
		return nil
	}
}

// waitOutput waits until the process has printed want, failing at once if it ends first.
func (p *plugin) waitOutput(t *testing.T, want string) {
	t.Helper()
	waitFor(t, waitTimeout, func() (bool, error) {
		if strings.Contains(p.stdout(), want) {
			return true, nil
		}
		if err := p.exited(); err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		return false, fmt.Errorf("%q not printed yet; stdout so far %q", want, p.stdout())
	})
}

func (p *plugin) stop() {
	p.cancel()
	<-p.done
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
