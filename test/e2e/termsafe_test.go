package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// rawControl finds a control character a terminal would act on (ESC, BEL, C1) in s.
func rawControl(s string) int {
	return strings.IndexFunc(s, func(r rune) bool { return r == 0x1b || r == 0x07 || (r >= 0x80 && r <= 0x9f) })
}

// Issue 14, item 2: a job whose command carries an OSC 52 clipboard write and whose container's
// termination message (set on the pod's status, as a kubelet or anyone who can write pod status
// would) carries CSI sequences: events, inspect, ps -o wide and wait's error line show them
// escaped; -o json keeps the exact bytes.
func TestTerminalEscapesFromTheCluster(t *testing.T) {
	ns := newNamespace(t)
	env := runOpts{env: []string{"GOBRAVE_HOME=" + t.TempDir()}}
	gb := func(args ...string) result {
		t.Helper()
		return runWith(t, env, append([]string{args[0], "-n", ns}, args[1:]...)...) // -n before any "--"
	}
	const (
		osc52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
		csi   = "\x1b[2J\x1b[H\u009b31m"
	)
	if r := gb("create", "evil", "--kind", "job", "--image", "registry.invalid/evil:1", "--label", labelHold+"=true",
		"--", "sh", "-c", "echo "+osc52); r.code != 0 {
		t.Fatalf("create: %s", r)
	}
	var pod corev1.Pod
	waitFor(t, waitTimeout, func() (bool, error) {
		pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			var seen []string
			for _, p := range pods.Items {
				seen = append(seen, fmt.Sprintf("%s %s %v", p.Name, p.Status.Phase, p.Labels))
			}
			return false, fmt.Errorf("want one running pod, have %q", seen)
		}
		pod = pods.Items[0]
		return true, nil
	})
	// The container "terminates" with a message full of escape sequences.
	termMsg := "disk full" + csi + "\nretry"
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := client(t).CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodFailed
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			cs.Ready, cs.State = false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 3, Reason: "Error", Message: termMsg, StartedAt: metav1.Now(), FinishedAt: metav1.Now(),
			}}
		}
		_, err = client(t).CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("fail the pod: %v", err)
	}
	waitFor(t, waitTimeout, func() (bool, error) {
		j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "evil", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})

	w := gb("wait", "evil", "--for=exited", "--timeout=1m")
	if w.code != 1 || !strings.Contains(w.stderr, "exit code 3 (Error) disk full^[[2J^[[H\\u009b31m") {
		t.Errorf("wait on the failed job: want exit 1 and the message escaped: %s", w)
	}
	if lines := strings.Split(strings.TrimSpace(w.stderr), "\n"); len(lines) != 1 {
		t.Errorf("wait's error is %d lines, want one: %q", len(lines), w.stderr)
	}
	outputs := map[string]string{"wait's error line": w.stderr}
	for name, args := range map[string][]string{
		"events":     {"events", "evil"},
		"inspect":    {"inspect", "evil"},
		"ps -o wide": {"ps", "-a", "-o", "wide"},
	} {
		r := gb(args...)
		if r.code != 0 {
			t.Fatalf("%s: %s", name, r)
		}
		outputs[name] = r.stdout + r.stderr
	}
	for name, out := range outputs {
		if i := rawControl(out); i >= 0 {
			t.Errorf("%s prints a raw control character at byte %d: %q", name, i, out)
		}
	}
	if !strings.Contains(outputs["inspect"], "echo ^[]52;c;cm0gLXJmIH4=^G") {
		t.Errorf("inspect does not show the command escaped:\n%s", outputs["inspect"])
	}
	if !strings.Contains(outputs["events"], `disk full^[[2J^[[H\u009b31m\nretry`) {
		t.Errorf("events do not show the message escaped:\n%s", outputs["events"])
	}

	// JSON round-trips the exact bytes.
	r := gb("events", "evil", "-o", "json")
	var evs []struct{ Type, Message string }
	if err := json.Unmarshal([]byte(r.stdout), &evs); err != nil || len(evs) == 0 {
		t.Fatalf("events -o json: %v\n%s", err, r)
	}
	if last := evs[len(evs)-1]; last.Type != "ContainerFailed" || !strings.Contains(last.Message, termMsg) {
		t.Errorf("last event %q %q, want ContainerFailed with the exact message %q", last.Type, last.Message, termMsg)
	}
	j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "evil", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if got := strings.Join(append(c.Command, c.Args...), " "); !strings.Contains(got, "echo "+osc52) {
		t.Errorf("the job's command %q lost the exact bytes", got)
	}
}

// Issue 14, item 7: a state database other users can write is refused by every verb with one line
// naming the file and the fix (exit 2), nothing is created in the cluster, and doctor says the
// same; a 0755 folder around a 0600 database is healthy.
func TestStateFileOthersCanChange(t *testing.T) {
	ns := newNamespace(t)
	home := t.TempDir()
	env := runOpts{env: []string{"GOBRAVE_HOME=" + home}}
	db := filepath.Join(home, "state.db")
	if r := runWith(t, env, "create", "web", "-n", ns, "--image", "registry.invalid/web:1"); r.code != 0 {
		t.Fatalf("create: %s", r)
	}
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := runWith(t, env, "doctor", "-n", ns); r.code != 0 || !strings.Contains(r.stdout, "warning") ||
		!strings.Contains(r.stdout, "other users can list it, not read the database") {
		t.Errorf("doctor on a 0755 folder around a 0600 database: want exit 0 and a warning: %s", r)
	}

	if err := os.Chmod(db, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ps", "-a"}, {"create", "db", "-n", ns, "--image", "registry.invalid/db:1"}, {"stop", "web", "-n", ns}} {
		r := runWith(t, env, args...)
		want := "error: refusing the state database: " + db + " is -rw-rw-rw-: other users can change your records (fix: chmod 600 " + db + ")\n"
		if r.code != 2 || r.stderr != want {
			t.Errorf("%s on a world-writable database: want exit 2 and %q: %s", args[0], want, r)
		}
	}
	if _, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), "db", metav1.GetOptions{}); err == nil {
		t.Error("create made a deployment although the state database was refused")
	}
	if d, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 1 {
		t.Errorf("stop acted although the state database was refused: %v", err)
	}
	r := runWith(t, env, "doctor", "-n", ns)
	if r.code != 1 || !strings.Contains(r.stdout, db+" is -rw-rw-rw-: other users can change your records (fix: chmod 600 "+db+")") {
		t.Errorf("doctor on a world-writable database: %s", r)
	}
	if err := os.Chmod(db, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runWith(t, env, "ps", "-a"); r.code != 0 || !strings.Contains(r.stdout, "|deployment|web") {
		t.Errorf("ps after chmod 600: %s", r)
	}
}

// Issue 14, item 8: --proxy-url is honoured: the plugin's requests go to a proxy of ours (which
// records the CONNECT and refuses it), and the error names the proxy.
func TestProxyURLHonoured(t *testing.T) {
	ns := newNamespace(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				mu.Lock()
				seen = append(seen, req.Method+" "+req.Host)
				mu.Unlock()
				_, _ = conn.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })

	proxy := "http://" + ln.Addr().String()
	r := runWith(t, runOpts{env: []string{"GOBRAVE_HOME=" + t.TempDir()}}, "adopt", "-n", ns, "--proxy-url", proxy, "--request-timeout", "20s")
	mu.Lock()
	defer mu.Unlock()
	if r.code != 1 || len(seen) == 0 {
		t.Fatalf("adopt through a refusing proxy: want exit 1 and requests at the proxy (saw %q): %s", seen, r)
	}
	if !strings.HasPrefix(seen[0], "CONNECT 127.0.0.1:") {
		t.Errorf("the proxy saw %q, want a CONNECT to the API server", seen)
	}
	if !strings.Contains(r.stderr, "proxy") {
		t.Errorf("the error does not name the proxy: %s", r)
	}
}
