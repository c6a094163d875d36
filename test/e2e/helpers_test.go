package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// Labels the cluster's kwok stages act on (hack/kwok/, docs/testing.md). Put them on a pod
// template, e.g. with the plugin's `--label gobrave.test/exit-code=42`.
const (
	// labelExitCode=N: every container terminates with exit code N (0-255) as soon as the pod runs
	// (after labelRunFor, if set); the pod goes Failed (Succeeded for 0), a Job with it Failed.
	labelExitCode = "gobrave.test/exit-code"
	// labelHold (any value): the pod keeps running until it is deleted; a Job never completes.
	labelHold = "gobrave.test/hold"
	// labelRunFor=<Go duration, e.g. 30s>: a Job's pod completes (or fails, with labelExitCode)
	// that long after it started running, instead of at once.
	labelRunFor = "gobrave.test/run-for"
	// labelWaiting=REASON: the pod stays Pending, every container waiting with REASON
	// (ErrImagePull, ImagePullBackOff, InvalidImageName, CreateContainerConfigError,
	// CreateContainerError) and the kubelet's message for it.
	labelWaiting = "gobrave.test/waiting"
	// labelCrashLoop=N: the pod runs unready, every container in CrashLoopBackOff with its last
	// termination exit code N (reason Error); a restart every 2 s.
	labelCrashLoop = "gobrave.test/crash-loop"
)

// Default timeouts. The cluster places and starts a pod in well under a second; these leave room
// for a loaded 2-core CI machine.
const (
	waitTimeout = 60 * time.Second
	runTimeout  = 2 * time.Minute
)

// requireCluster skips the test when TestMain found no cluster (only possible without
// GOBRAVE_E2E=1). Every helper calls it.
func requireCluster(t testing.TB) {
	t.Helper()
	if harness.skipReason != "" {
		t.Skip("no e2e cluster: " + harness.skipReason)
	}
}

// client returns a clientset of the cluster for setting up and asserting.
func client(t testing.TB) kubernetes.Interface {
	t.Helper()
	requireCluster(t)
	return harness.client
}

// result is what a command printed and its exit code.
type result struct {
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("exit code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runOpts changes how runWith starts the command.
type runOpts struct {
	env     []string      // extra KEY=VALUE entries over the suite's environment
	stdin   string        // fed to the command
	timeout time.Duration // default runTimeout
}

// run executes `kubectl gobrave args...` through the real kubectl (plugin discovery on PATH) and
// returns what it printed and its exit code. It fails the test only when the command cannot run
// at all or times out.
func run(t testing.TB, args ...string) result {
	t.Helper()
	return runWith(t, runOpts{}, args...)
}

// runOK is run that fails the test unless the exit code is 0.
func runOK(t testing.TB, args ...string) result {
	t.Helper()
	r := run(t, args...)
	if r.code != 0 {
		t.Fatalf("kubectl gobrave %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// runWith is run with extra environment, stdin or timeout.
func runWith(t testing.TB, o runOpts, args ...string) result {
	t.Helper()
	requireCluster(t)
	if harness.pluginErr != nil {
		t.Fatalf("kubectl-gobrave was not built (%s=1): %v", envNoPlugin, harness.pluginErr)
	}
	return execute(t, o, "kubectl", append([]string{"gobrave"}, args...)...)
}

// kubectl runs the real kubectl (from hack/testbin.sh) against the cluster.
func kubectl(t testing.TB, args ...string) result {
	t.Helper()
	requireCluster(t)
	return execute(t, runOpts{}, "kubectl", args...)
}

func execute(t testing.TB, o runOpts, name string, args ...string) result {
	t.Helper()
	timeout := o.timeout
	if timeout == 0 {
		timeout = runTimeout
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Stdin = strings.NewReader(o.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %s: no exit within %s: %v\n%s", name, strings.Join(args, " "), timeout, err, r)
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return r
}

// waitFor calls cond every 100 ms until it returns true, and fails the test after timeout. An
// error counts as "not yet"; the last one is in the failure message.
func waitFor(t testing.TB, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		done, err := cond()
		if done && err == nil {
			return
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s (last error: %v)", timeout, lastErr)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting: %v", t.Context().Err())
		case <-tick.C:
		}
	}
}

// holdsFor checks cond every 100 ms for the whole window and fails the test the first time it
// returns an error: for asserting that something does NOT happen for a while.
func holdsFor(t testing.TB, window time.Duration, cond func() error) {
	t.Helper()
	end := time.Now().Add(window)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := cond(); err != nil {
			t.Fatalf("within %s: %v", window, err)
		}
		if time.Now().After(end) {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended while observing: %v", t.Context().Err())
		case <-tick.C:
		}
	}
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// newNamespace creates a namespace named after the test, waits until pods can be created in it
// (its default ServiceAccount exists) and deletes it when the test ends.
func newNamespace(t testing.TB) string {
	t.Helper()
	c := client(t)
	base := strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	name := "e2e-" + base + "-" + randomSuffix(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"gobrave.test/e2e": "true"},
	}}
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled here.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	waitFor(t, waitTimeout, func() (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(name).Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil, err
	})
	return name
}

func randomSuffix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

var podLogMu sync.Mutex

// writePodLog appends lines to the log that every pod's containers show (kwok's ClusterLogs),
// unless the pod was given a log of its own with usePodLog. Every test sees every other test's
// lines there: make yours unique. kubectl logs -f follows appended lines.
func writePodLog(t testing.TB, lines ...string) {
	t.Helper()
	requireCluster(t)
	appendLog(t, harness.podLog, lines...)
}

// appendLog appends lines to a log file in the CRI format kwok reads
// (`<RFC3339Nano time> stdout F <text>`), timestamped now.
func appendLog(t testing.TB, path string, lines ...string) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l)
	}
	podLogMu.Lock()
	defer podLogMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

var logsResource = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// usePodLog gives one pod (which must be scheduled) a log file of its own, through a kwok Logs
// object named after the pod, and returns the file's path for appendLog. The file starts with the
// line "gobrave-e2e: log of NAMESPACE/POD"; usePodLog returns once the pod's log shows it.
func usePodLog(t testing.TB, namespace, pod string) string {
	t.Helper()
	requireCluster(t)
	path := filepath.Join(harness.tmp, "podlogs", namespace+"_"+pod+".log")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf("gobrave-e2e: log of %s/%s", namespace, pod)
	appendLog(t, path, first)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Logs",
		"metadata":   map[string]any{"name": pod, "namespace": namespace},
		"spec": map[string]any{"logs": []any{
			map[string]any{"logsFile": path, "follow": true},
		}},
	}}
	_, err := harness.dynamic.Resource(logsResource).Namespace(namespace).Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create kwok Logs %s/%s: %v", namespace, pod, err)
	}
	c := client(t)
	waitFor(t, waitTimeout, func() (bool, error) {
		out, err := c.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(t.Context())
		return strings.Contains(string(out), first), err
	})
	return path
}
