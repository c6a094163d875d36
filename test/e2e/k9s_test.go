package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestK9s runs the repository's plugins.yaml in the real k9s (the version hack/k9s/go.mod pins,
// built by hack/k9s/build.sh into the cache), inside a detached tmux session against the suite's
// cluster. It reads gobrave inspect's output through the Shift-D entry from a deployment's row, from
// its pod's row and from a job's row, events (Shift-E) and logs -f (Shift-G, ended with Ctrl-C) of
// the deployment, then stops (Shift-S, confirmed), starts (Shift-T) and deletes (Shift-X,
// confirmed) it, checking the cluster and the record after each; it waits for gobrave's
// confirmation in k9s's status line, and checks the cluster and the plugin's state database. k9s
// only logs a plugin it rejects (a clashing shortcut is "duplicate plugin key"), so the test reads
// k9s's log as well.
func TestK9s(t *testing.T) {
	requireCluster(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		skipOrFail(t, "tmux is not installed (Debian package tmux)")
	}
	k9s := k9sBinary(t)

	ns := newNamespace(t)
	const name = "k9s-web"
	id := strings.TrimSpace(runOK(t, "run", name, "-n", ns, "--image", "registry.invalid/web:1", "--timeout", "2m").stdout)
	c := client(t)
	dp, err := c.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dp.Spec.Replicas == nil || *dp.Spec.Replicas != 1 {
		t.Fatalf("deployment %s/%s before k9s: spec.replicas %v, want 1", ns, name, replicas(dp.Spec.Replicas))
	}
	if types := eventTypes(t, id); slices.Contains(types, "StopRequested") {
		t.Fatalf("%s: events %v before k9s: StopRequested already there", id, types)
	}

	s := startK9s(t, k9s, "--headless", "-c", "deploy", "-n", ns)
	// The view's title, not only the name: the pods view also shows "k9s-web-…" rows.
	deployView := func(p string) bool {
		return strings.Contains(strings.ToLower(p), "deployments(") && strings.Contains(p, name) && !strings.Contains(p, pressEnter)
	}
	s.waitPane(t, "the deployments view with "+name, deployView)

	// gobrave inspect (Shift-D) in the foreground: k9s gives the terminal to the command, whose
	// output stays until Enter.
	s.keys(t, "D")
	s.waitPane(t, "gobrave inspect's output", func(p string) bool {
		return strings.Contains(p, pressEnter) && strings.Contains(p, id)
	})
	s.keys(t, "Enter")
	s.waitPane(t, "the deployments view again", deployView)

	// The same from the deployment's pod: the workload comes from its gobrave-workload label
	// ($COL-LABELS).
	s.keys(t, ":pods", "Enter")
	podView := func(p string) bool {
		return strings.Contains(strings.ToLower(p), "pods(") && strings.Contains(p, name+"-") && !strings.Contains(p, pressEnter)
	}
	s.waitPane(t, "the pods view with a pod of "+name, podView)
	s.keys(t, "D")
	s.waitPane(t, "gobrave inspect's output for the pod's workload", func(p string) bool {
		return strings.Contains(p, pressEnter) && strings.Contains(p, id)
	})
	s.keys(t, "Enter")
	s.waitPane(t, "the pods view again", podView)
	s.keys(t, "?")
	s.waitPane(t, "the help of the pods view with the gobrave entries", func(p string) bool {
		return strings.Contains(p, "gobrave inspect (workload)") && strings.Contains(p, "gobrave logs -f (workload)")
	})
	// Wait for the help to close before typing on: an Escape followed at once by ":" reads as Alt-:.
	s.keys(t, "Escape")
	s.waitPane(t, "the pods view without the help", func(p string) bool {
		return podView(p) && !strings.Contains(p, "gobrave inspect (workload)")
	})

	// gobrave events (Shift-E) and logs -f (Shift-G) from the deployment's row.
	s.keys(t, ":deploy", "Enter")
	s.waitPane(t, "the deployments view", deployView)
	s.keys(t, "E")
	s.waitPane(t, "gobrave events' output", func(p string) bool {
		return strings.Contains(p, pressEnter) && strings.Contains(p, "Created") && strings.Contains(p, "ContainerStarted")
	})
	s.keys(t, "Enter")
	s.waitPane(t, "the deployments view again", deployView)
	// Every pod of the test cluster shows the shared log (docs/testing.md).
	logLine := "k9s-logs-" + ns
	writePodLog(t, logLine)
	s.keys(t, "G")
	s.waitPane(t, "gobrave logs -f following the pod's log", func(p string) bool {
		return strings.Contains(p, "(Ctrl-C returns to k9s)") && strings.Contains(p, logLine)
	})
	// Ctrl-C reaches the whole foreground command (the entry says it returns to k9s).
	s.keys(t, "C-c")
	s.waitPane(t, "the deployments view after Ctrl-C", deployView)

	// The jobs view: its entries act on the job's own ID. The job is made now, so that the pods
	// view above had only the deployment's pod.
	const jobName = "k9s-task"
	jobID := strings.TrimSpace(runOK(t, "create", jobName, "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1",
		"--label", labelHold+"=true").stdout)
	s.keys(t, ":jobs", "Enter")
	jobView := func(p string) bool {
		return strings.Contains(strings.ToLower(p), "jobs(") && strings.Contains(p, jobName) && !strings.Contains(p, pressEnter)
	}
	s.waitPane(t, "the jobs view with "+jobName, jobView)
	s.keys(t, "D")
	s.waitPane(t, "gobrave inspect's output for the job", func(p string) bool {
		return strings.Contains(p, pressEnter) && strings.Contains(p, jobID)
	})
	s.keys(t, "Enter")
	s.waitPane(t, "the jobs view again", jobView)

	// gobrave stop (Shift-S) asks first; the dialog's focus starts on Cancel.
	s.keys(t, ":deploy", "Enter")
	s.waitPane(t, "the deployments view", deployView)
	s.keys(t, "S")
	s.waitPane(t, "the confirmation dialog", func(p string) bool { return strings.Contains(p, "Confirm gobrave stop") })
	if p := s.pane(t); !strings.Contains(p, "kubectl gobrave stop") {
		t.Errorf("the confirmation dialog does not show the command:\n%s", p)
	}
	// stop runs in the background; k9s's status line shows gobrave's one-line result. k9s clears
	// it after 6 s, or sooner at its next cluster check (every 15 s): poll often.
	s.keys(t, "Tab", "Enter")
	s.waitStatus(t, fmt.Sprintf("deployment.apps/%s stopped (%s)", name, id))
	waitReplicas(t, ns, name, 0)
	if types := eventTypes(t, id); !slices.Contains(types, "StopRequested") {
		t.Errorf("%s: events %v: no StopRequested recorded", id, types)
	}

	// gobrave start (Shift-T) asks nothing.
	s.keys(t, "T")
	s.waitStatus(t, fmt.Sprintf("deployment.apps/%s started (%s)", name, id))
	waitReplicas(t, ns, name, 1)
	if types := eventTypes(t, id); !slices.Contains(types, "StartRequested") {
		t.Errorf("%s: events %v: no StartRequested recorded", id, types)
	}

	// gobrave delete (Shift-X) asks first.
	s.keys(t, "X")
	s.waitPane(t, "the delete confirmation dialog", func(p string) bool { return strings.Contains(p, "Confirm gobrave delete") })
	s.keys(t, "Tab", "Enter")
	s.waitStatus(t, fmt.Sprintf("deployment.apps/%s deleted (%s)", name, id))
	waitFor(t, waitTimeout, func() (bool, error) {
		_, err := c.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("deployment %s/%s still exists: %v", ns, name, err)
	})
	if types := eventTypes(t, id); !slices.Contains(types, "DeleteRequested") {
		t.Errorf("%s: events %v: no DeleteRequested recorded", id, types)
	}

	// Rejected plugins are only logged.
	log, err := os.ReadFile(s.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"Plugins load failed", "duplicate plugin key", "plugin validation failed", "Plugin schema validation failed"} {
		if strings.Contains(string(log), bad) {
			t.Errorf("k9s log %s: %q:\n%s", s.log, bad, log)
		}
	}
}

// waitStatus waits for gobrave's one-line result of a background entry in k9s's status line, and
// fails at once on an error there. k9s clears the line after 6 s, or sooner at its next cluster
// check (every 15 s): the pane is polled often.
func (s *k9sSession) waitStatus(t *testing.T, confirmation string) {
	t.Helper()
	s.waitPane(t, "gobrave's "+strconv.Quote(confirmation)+" in k9s's status line", func(p string) bool {
		if strings.Contains(p, "error:") {
			t.Fatalf("kubectl gobrave failed inside k9s:\n%s", p)
		}
		return strings.Contains(p, confirmation)
	})
}

// waitReplicas waits until the deployment's spec.replicas is want.
func waitReplicas(t *testing.T, ns, name string, want int32) {
	t.Helper()
	waitFor(t, waitTimeout, func() (bool, error) {
		dp, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if dp.Spec.Replicas == nil || *dp.Spec.Replicas != want {
			return false, fmt.Errorf("deployment %s/%s: spec.replicas %v, want %d", ns, name, replicas(dp.Spec.Replicas), want)
		}
		return true, nil
	})
}

// eventTypes is the types of the events the plugin's state database holds for id, oldest first.
func eventTypes(t *testing.T, id string) []string {
	t.Helper()
	var events []struct {
		Type string `json:"type"`
	}
	r := runOK(t, "events", id, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &events); err != nil {
		t.Fatalf("events -o json: %v\n%s", err, r.stdout)
	}
	types := make([]string, len(events))
	for i, e := range events {
		types[i] = e.Type
	}
	return types
}

func replicas(r *int32) string {
	if r == nil {
		return "unset"
	}
	return fmt.Sprint(*r)
}

// pressEnter is what the reading entries of plugins.yaml print when the output is complete.
const pressEnter = "Press Enter to return to k9s"

// skipOrFail fails the test under GOBRAVE_E2E=1 and skips it otherwise.
func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv(envRequired) == "1" {
		t.Fatalf("%s (%s=1)", reason, envRequired)
	}
	t.Skip(reason)
}

// k9sBinary returns the k9s built by hack/k9s/build.sh. A missing one is built under
// GOBRAVE_E2E=1 (several minutes cold: it counts against -timeout) and skips the test otherwise,
// as missing control-plane binaries do.
func k9sBinary(t *testing.T) string {
	t.Helper()
	script := filepath.Join(harness.root, "hack", "k9s", "build.sh")
	// TestMain moved XDG_CONFIG_HOME (and with it go's own env file) and XDG_DATA_HOME into the
	// run's temp folder; the build gets the default ones back.
	env := withoutEnv(os.Environ(), "XDG_CONFIG_HOME", "XDG_DATA_HOME")

	// Without GOBRAVE_E2E=1, only look: build.sh prints the path at once when the binary exists.
	if os.Getenv(envRequired) != "1" {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		probe := exec.CommandContext(ctx, script, "--path")
		probe.Env = env
		out, err := probe.Output()
		path := strings.TrimSpace(string(out))
		if err != nil || path == "" {
			t.Skipf("cannot locate the k9s binary: %v", err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Skipf("k9s is not built (%s): run hack/k9s/build.sh, or set %s=1 to build it", path, envRequired)
		}
		return path
	}

	start := time.Now()
	cmd := exec.CommandContext(t.Context(), script)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/k9s/build.sh: %v\n%s", err, stderr.String())
	}
	path := strings.TrimSpace(string(out))
	if stderr.Len() > 0 {
		t.Logf("hack/k9s/build.sh (%s):\n%s", time.Since(start).Round(time.Second), stderr.String())
	}
	return path
}

func withoutEnv(env []string, keys ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, key := range keys {
			drop = drop || k == key
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// k9sSession is k9s running in a detached tmux session on a tmux server of its own.
type k9sSession struct {
	socket string // tmux -S
	env    []string
	log    string // k9s's log file
}

// startK9s starts `k9s args...` in a 200x50 tmux session with the suite's environment (KUBECONFIG,
// `kubectl gobrave` on PATH, GOBRAVE_HOME) and XDG folders of its own holding k9s/plugins.yaml,
// a copy of the repository's. The tmux server is killed when the test ends, and also when the
// test process dies (a -timeout, SIGKILL): a watchdog in its own process group waits for EOF on a
// pipe only this process holds, as TestMain's cluster watchdog does.
func startK9s(t *testing.T, k9s string, args ...string) *k9sSession {
	t.Helper()
	// The server's socket lives in this folder (tmux -S: a server of its own, and no socket file
	// left in /tmp/tmux-UID); a short path, as a socket path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "gobrave-k9s-")
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "tmux.sock")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	watchdog := exec.Command("bash", "-c", `cat >/dev/null; tmux -S "$0" kill-server >/dev/null 2>&1; rm -rf "$1"`, socket, dir)
	watchdog.Stdin = r
	watchdog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := watchdog.Start(); err != nil {
		t.Fatalf("start the tmux watchdog: %v", err)
	}
	_ = r.Close()
	t.Cleanup(func() { // runs last: after the cleanup below has read the log and killed the server
		_ = w.Close()
		_ = watchdog.Wait() // it removes dir
	})
	xdg := map[string]string{}
	for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"} {
		xdg[k] = filepath.Join(dir, strings.ToLower(strings.TrimPrefix(k, "XDG_")))
		if err := os.MkdirAll(xdg[k], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plugins, err := os.ReadFile(filepath.Join(harness.root, "plugins.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k9sConfig := filepath.Join(xdg["XDG_CONFIG_HOME"], "k9s")
	if err := os.MkdirAll(k9sConfig, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(k9sConfig, "plugins.yaml"), plugins, 0o644); err != nil {
		t.Fatal(err)
	}
	// No look for a newer release on GitHub: there is no internet here.
	if err := os.WriteFile(filepath.Join(k9sConfig, "config.yaml"), []byte("k9s:\n  skipLatestRevCheck: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// remain-on-exit keeps what a crashed k9s printed for the failure message; -f keeps the
	// user's ~/.tmux.conf out.
	tmuxConf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(tmuxConf, []byte("set -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	env := withoutEnv(os.Environ(), "TMUX", "TMUX_PANE", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
	for k, v := range xdg {
		env = append(env, k+"="+v)
	}
	if os.Getenv("TERM") == "" {
		env = append(env, "TERM=xterm-256color")
	}
	s := &k9sSession{
		socket: socket,
		env:    env,
		log:    filepath.Join(dir, "k9s.log"),
	}
	t.Cleanup(func() {
		if t.Failed() {
			if p, err := s.tmux("capture-pane", "-p", "-t", "k9s"); err == nil {
				t.Logf("k9s's screen at the end:\n%s", p)
			}
			if log, err := os.ReadFile(s.log); err == nil {
				t.Logf("k9s log %s:\n%s", s.log, log)
			}
		}
		if out, err := s.tmux("kill-server"); err != nil && !strings.Contains(out, "no server running") {
			t.Errorf("tmux kill-server: %v: %s", err, out)
		}
	})
	cmdline := append([]string{k9s, "--logFile", s.log, "--logLevel", "debug"}, args...)
	out, err := s.tmux(append([]string{"-f", tmuxConf, "new-session", "-d", "-s", "k9s", "-x", "200", "-y", "50", "--"}, cmdline...)...)
	if err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	return s
}

func (s *k9sSession) tmux(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", s.socket}, args...)...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pane is what the session shows now.
func (s *k9sSession) pane(t *testing.T) string {
	t.Helper()
	out, err := s.tmux("capture-pane", "-p", "-t", "k9s")
	if err != nil {
		t.Fatalf("tmux capture-pane: %v: %s", err, out)
	}
	return out
}

// keys sends tmux key names (X is Shift-X; Tab, Enter) to k9s.
func (s *k9sSession) keys(t *testing.T, keys ...string) {
	t.Helper()
	if out, err := s.tmux(append([]string{"send-keys", "-t", "k9s"}, keys...)...); err != nil {
		t.Fatalf("tmux send-keys %q: %v: %s", keys, err, out)
	}
}

// waitPane polls the screen (every 50 ms) until ok accepts it. k9s takes a while to draw on a loaded machine.
func (s *k9sSession) waitPane(t *testing.T, what string, ok func(pane string) bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last string
	for {
		p, err := s.tmux("capture-pane", "-p", "-t", "k9s")
		if err != nil {
			t.Fatalf("waiting for %s: tmux capture-pane: %v: %s", what, err, p)
		}
		if ok(p) {
			return
		}
		last = p
		if strings.Contains(p, "Pane is dead") {
			t.Fatalf("waiting for %s: k9s exited:\n%s", what, p)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not on the screen within %s; the screen:\n%s", what, waitTimeout, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
