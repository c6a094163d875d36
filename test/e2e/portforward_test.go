package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	portForwardsResource        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}
	clusterPortForwardsResource = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterportforwards"}
)

// echoServer listens on a loopback port and answers every line with tag + ":" + the line.
func echoServer(t *testing.T, tag string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		ended bool
	)
	// kwok keeps its side of a tunnel open after the client has gone: close every connection.
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		ended = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			if ended {
				_ = c.Close()
			}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := fmt.Fprintf(c, "%s:%s\n", tag, sc.Text()); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// forwardTo makes kwok forward port of the pods it selects to 127.0.0.1:target: a PortForward
// named after one pod when pod is set (it takes precedence), else a ClusterPortForward for every
// pod of namespace.
func forwardTo(t *testing.T, namespace, pod string, port, target int) {
	t.Helper()
	forwards := []any{map[string]any{
		"ports":  []any{int64(port)},
		"target": map[string]any{"address": "127.0.0.1", "port": int64(target)},
	}}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kwok.x-k8s.io/v1alpha1"}}
	res := harness.dynamic.Resource(clusterPortForwardsResource)
	var err error
	if pod != "" {
		obj.SetKind("PortForward")
		obj.SetName(pod)
		obj.SetNamespace(namespace)
		obj.Object["spec"] = map[string]any{"forwards": forwards}
		_, err = harness.dynamic.Resource(portForwardsResource).Namespace(namespace).Create(t.Context(), obj, metav1.CreateOptions{})
	} else {
		obj.SetKind("ClusterPortForward")
		obj.SetName("gobrave-" + namespace)
		obj.Object["spec"] = map[string]any{"selector": map[string]any{"matchNamespaces": []any{namespace}}, "forwards": forwards}
		_, err = res.Create(t.Context(), obj, metav1.CreateOptions{})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = res.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
		})
	}
	if err != nil {
		t.Fatalf("create kwok %s: %v", obj.GetKind(), err)
	}
}

// exchange connects to 127.0.0.1:port, sends line and returns the answer line.
func exchange(port int, line string) (string, error) {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

// TestPortForward: `kubectl gobrave port-forward` carries bytes both ways to the workload's pod
// (kwok forwards the pod's port to a loopback echo server of the test), moves to the new pod
// after `kubectl gobrave restart` with one line saying so, and ends with exit 0 on Ctrl-C. A bad
// port is exit 2; a workload without a running pod is exit 1 after --pod-running-timeout.
func TestPortForward(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	id := createID(t, "create", "echo", "-n", ns, "--image", "registry.invalid/echo:1", "--port", "7000")
	runOK(t, "wait", id, "--for=started", "--timeout", "2m")
	oldPod := waitPodRunning(t, ns, "gobrave-workload=echo")
	// The old pod answers "old:", every other pod of the namespace "new:".
	forwardTo(t, ns, oldPod.Name, 7000, echoServer(t, "old"))
	forwardTo(t, ns, "", 7000, echoServer(t, "new"))

	r := run(t, "port-forward", id, "80x")
	if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `port "80x"`) {
		t.Errorf("port-forward with a bad port: %s; want exit 2 and one line naming it", r)
	}

	p := startForward(t, "port-forward", id, ":7000")
	m := p.waitLine(t, regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 7000`))
	local, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	var got string
	waitFor(t, waitTimeout, func() (bool, error) {
		var err error
		got, err = exchange(local, "ping "+ns)
		if err == nil && got == "old:ping "+ns {
			return true, nil
		}
		return false, fmt.Errorf("answer %q: %v", got, err)
	})

	runOK(t, "restart", id, "--wait", "--timeout", "2m")
	moved := p.waitLine(t, regexp.MustCompile(`Forwarding to pod (\S+) of `+regexp.QuoteMeta(id)+`: pod `+regexp.QuoteMeta(oldPod.Name)+` (.*)`))
	if moved[1] == oldPod.Name {
		t.Errorf("moved to the same pod: %s", moved[0])
	}
	waitFor(t, waitTimeout, func() (bool, error) {
		var err error
		got, err = exchange(local, "pong "+ns)
		if err == nil && got == "new:pong "+ns {
			return true, nil
		}
		return false, fmt.Errorf("answer %q: %v", got, err)
	})
	if n := strings.Count(p.out.String(), "Forwarding from 127.0.0.1:"); n != 1 {
		t.Errorf("the listening line was printed %d times, want once:\n%s", n, p.out.String())
	}

	// Ctrl-C: exit 0.
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
		t.Fatalf("port-forward did not end after SIGINT\n%s", p.out.String())
	}
	if p.err != nil {
		t.Errorf("port-forward after Ctrl-C: %v, want exit 0\nstderr: %s", p.err, p.errOut.String())
	}

	// No running pod: wait --pod-running-timeout, then exit 1.
	runOK(t, "stop", id, "--wait", "--timeout", "2m")
	waitFor(t, waitTimeout, func() (bool, error) {
		pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "gobrave-workload=echo"})
		return err == nil && len(pods.Items) == 0, err
	})
	r = run(t, "port-forward", id, "7000", "--pod-running-timeout", "2s")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "no running, ready pod after 2s") {
		t.Errorf("port-forward to a stopped workload: %s; want exit 1 after the timeout, one line", r)
	}
}

// forward is a port-forward running in the background.
type forward struct {
	cmd         *exec.Cmd
	out, errOut *syncBuffer
	done        chan struct{}
	err         error
}

// startForward starts `kubectl gobrave args...`; kubectl execs the plugin, so a signal to the
// process reaches the plugin itself.
func startForward(t *testing.T, args ...string) *forward {
	t.Helper()
	requireCluster(t)
	if harness.pluginErr != nil {
		t.Fatalf("kubectl-gobrave was not built: %v", harness.pluginErr)
	}
	p := &forward{out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command("kubectl", append([]string{"gobrave"}, args...)...)
	p.cmd.Env = os.Environ()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errOut
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitLine waits for a line of stdout matching re and returns its submatches.
func (p *forward) waitLine(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	waitFor(t, waitTimeout, func() (bool, error) {
		if m = re.FindStringSubmatch(p.out.String()); m != nil {
			return true, nil
		}
		select {
		case <-p.done:
			t.Fatalf("port-forward ended (%v) before printing %s\nstdout:\n%s\nstderr:\n%s", p.err, re, p.out, p.errOut)
		default:
		}
		return false, fmt.Errorf("no %s yet in %q (stderr %q)", re, p.out.String(), p.errOut.String())
	})
	return m
}
