package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Environment variables read by the harness.
const (
	// envRequired=1 turns every reason to skip into a failure (CI and `make test` set it);
	// envRequired=0 skips the suite. Unset, it runs when the control-plane binaries are built.
	envRequired = "GOBRAVE_E2E"
	// envNoPlugin=1 tolerates a plugin that does not build: tests that run it fail, the others
	// (TestClusterSmoke) run. For working on the harness while the CLI is being written.
	envNoPlugin = "GOBRAVE_E2E_NO_PLUGIN"
)

// suite is the state TestMain sets up once for every test in the package.
type suite struct {
	skipReason string // non-empty: no cluster, every test skips

	root       string // repository root
	tmp        string // removed at the end of the run
	clusterDir string // $KWOK_WORKDIR of the cluster
	testbin    string // control-plane binaries, kubectl among them
	kubeconfig string // the tests' copy of the cluster's kubeconfig
	podLog     string // the file the ClusterLogs of every pod points at
	auditLog   string // the API server's audit log (GOBRAVE_AUDIT_LOG): requests counted server-side
	pluginErr  error  // why the plugin was not built, with envNoPlugin=1

	client  kubernetes.Interface
	dynamic dynamic.Interface
}

var harness suite

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	required := os.Getenv(envRequired) == "1"
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) }

	root, err := repoRoot()
	if err != nil {
		logf("%v", err)
		return 1
	}
	harness.root = root

	if !required {
		flag.Parse()
		reason := missingTestbin(root)
		switch {
		case os.Getenv(envRequired) == "0":
			reason = envRequired + "=0"
		case testing.Short():
			reason = "-short"
		case reason != "":
			reason += "; run hack/testbin.sh, or set " + envRequired + "=1 to build and run them"
		}
		if reason != "" {
			logf("skipping the e2e tests: %s", reason)
			harness.skipReason = reason
			return m.Run()
		}
	}

	tmp, err := os.MkdirTemp("", "gobrave-e2e-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	harness.tmp = tmp
	harness.clusterDir = filepath.Join(tmp, "cluster")

	// The cluster must not outlive this process, however it ends. A watchdog in its own process
	// group waits for EOF on a pipe only we hold open, then runs cluster-down.sh: that covers a
	// panicking test, a -timeout, SIGKILL. Signals we can catch are handled below as well.
	stopWatchdog, err := startWatchdog(root, harness.clusterDir, tmp)
	if err != nil {
		logf("%v", err)
		return 1
	}
	// Cancelling ctx stops the cluster start and the plugin build; bg waits for them to be gone
	// before the cluster is removed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bg sync.WaitGroup
	bg.Add(2) // the plugin build and the cluster start
	var once sync.Once
	teardown := func() {
		once.Do(func() {
			cancel()
			bg.Wait()
			clusterDown(root, harness.clusterDir)
			stopWatchdog()
			_ = os.RemoveAll(tmp)
		})
	}
	defer teardown()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-signals
		logf("%v: removing the cluster", s)
		teardown()
		os.Exit(1)
	}()

	// Build the plugin while the cluster starts.
	pluginDone := make(chan error, 1)
	go func() {
		defer bg.Done()
		start := time.Now()
		err := buildPlugin(ctx, root, filepath.Join(tmp, "bin"))
		if err == nil {
			logf("kubectl-gobrave built in %s", time.Since(start).Round(100*time.Millisecond))
		}
		pluginDone <- err
	}()

	start := time.Now()
	kubeconfig, err := clusterUp(ctx, root, harness.clusterDir)
	bg.Done()
	if err == nil {
		logf("cluster ready in %s: %s", time.Since(start).Round(100*time.Millisecond), kubeconfig)
	}
	buildErr := <-pluginDone
	if buildErr != nil {
		logf("cannot build kubectl-gobrave: %v", buildErr)
	}
	if err != nil {
		logf("cannot start the cluster: %v", err)
		if required {
			return 1
		}
		logf("%s is not set: skipping", envRequired)
		harness.skipReason = "the cluster did not start: " + err.Error()
		return m.Run()
	}
	if buildErr != nil {
		if os.Getenv(envNoPlugin) != "1" {
			logf("failing: set %s=1 to run only the tests that do not need the plugin", envNoPlugin)
			return 1
		}
		logf("%s=1: continuing without the plugin; the tests that run it will fail", envNoPlugin)
		harness.pluginErr = buildErr
	}

	if err := harness.configure(kubeconfig); err != nil {
		logf("%v", err)
		return 1
	}
	return m.Run()
}

// configure points the process environment (inherited by kubectl and the plugin) at temp folders
// and the cluster, and builds the clients. Only after the plugin build: XDG_CONFIG_HOME also
// moves `go env`'s configuration.
func (s *suite) configure(clusterKubeconfig string) error {
	env, err := readEnvFile(filepath.Join(s.clusterDir, "cluster.env"))
	if err != nil {
		return err
	}
	s.testbin = env["GOBRAVE_TESTBIN"]
	if s.testbin == "" {
		return errors.New("cluster.env names no GOBRAVE_TESTBIN")
	}
	s.podLog = filepath.Join(s.clusterDir, "logs", "pod.log")
	s.auditLog = env["GOBRAVE_AUDIT_LOG"]
	if s.auditLog == "" {
		return errors.New("cluster.env names no GOBRAVE_AUDIT_LOG: hack/cluster-up.sh ran without --audit-log")
	}

	// The tests get their own copy, so a test that switches contexts cannot break the cluster-down.
	data, err := os.ReadFile(clusterKubeconfig)
	if err != nil {
		return err
	}
	s.kubeconfig = filepath.Join(s.tmp, "kubeconfig.yaml")
	if err := os.WriteFile(s.kubeconfig, data, 0o600); err != nil {
		return err
	}

	dirs := map[string]string{
		"GOBRAVE_HOME":    filepath.Join(s.tmp, "gobrave-home"),
		"XDG_CONFIG_HOME": filepath.Join(s.tmp, "xdg-config"),
		"XDG_DATA_HOME":   filepath.Join(s.tmp, "xdg-data"),
		"KUBECACHEDIR":    filepath.Join(s.tmp, "kube-cache"),
	}
	for k, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Setenv(k, dir); err != nil {
			return err
		}
	}
	settings := map[string]string{
		"KUBECONFIG": s.kubeconfig,
		"PATH":       strings.Join([]string{filepath.Join(s.tmp, "bin"), s.testbin, os.Getenv("PATH")}, string(os.PathListSeparator)),
	}
	for k, v := range settings {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	if s.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if s.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	return nil
}

// repoRoot is two folders above this file (test/e2e/main_test.go).
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the test source")
	}
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "hack", "cluster-up.sh")); err != nil {
		return "", fmt.Errorf("repository root not found from %s: %w", file, err)
	}
	return root, nil
}

// missingTestbin says which control-plane binaries hack/testbin.sh has not built yet, using the
// folder and version from the script itself, without building anything.
func missingTestbin(root string) string {
	script, err := os.ReadFile(filepath.Join(root, "hack", "testbin.sh"))
	if err != nil {
		return err.Error()
	}
	m := regexp.MustCompile(`(?m)^K8S_VERSION=(\S+)$`).FindSubmatch(script)
	if m == nil {
		return "hack/testbin.sh sets no K8S_VERSION"
	}
	dir := os.Getenv("GOBRAVE_TESTBIN")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return err.Error()
			}
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "gobrave-testbin", string(m[1]))
	}
	var missing []string
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok", "kwokctl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%s missing from %s", strings.Join(missing, ", "), dir)
	}
	return ""
}

// clusterUp runs hack/cluster-up.sh with its progress on our stderr and returns the kubeconfig.
func clusterUp(ctx context.Context, root, dir string) (string, error) {
	// GOBRAVE_CLUSTER_FLAGS: extra flags for hack/cluster-up.sh (make test-faults: more nodes and
	// no client rate limits in the controllers, so that hundreds of jobs end when they should).
	// --audit-log always: the request-count guards read the API server's audit log.
	flags := strings.Fields(os.Getenv("GOBRAVE_CLUSTER_FLAGS"))
	if !slices.Contains(flags, "--audit-log") {
		flags = append(flags, "--audit-log")
	}
	cmd := groupCommand(ctx, filepath.Join(root, "hack", "cluster-up.sh"), flags...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBRAVE_CLUSTER_DIR="+dir)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/cluster-up.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	kubeconfig := lines[len(lines)-1]
	if _, err := os.Stat(kubeconfig); err != nil {
		return "", fmt.Errorf("hack/cluster-up.sh printed no kubeconfig: %w", err)
	}
	return kubeconfig, nil
}

func clusterDown(root, dir string) {
	cmd := exec.Command(filepath.Join(root, "hack", "cluster-down.sh"), dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: hack/cluster-down.sh %s: %v\n", dir, err)
	}
}

// startWatchdog starts `cluster-down.sh dir; rm -rf tmp` in a process group of its own (so a Ctrl-C does not
// reach it), blocked until its stdin reaches EOF. The write end stays in this process only (Go
// opens files close-on-exec), so EOF comes when stop is called or this process dies in any way.
func startWatchdog(root, dir, tmp string) (stop func(), err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "-c", `cat >/dev/null; "$0" "$1" >/dev/null 2>&1; rm -rf "$2"`,
		filepath.Join(root, "hack", "cluster-down.sh"), dir, tmp)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("start the cluster watchdog: %w", err)
	}
	_ = r.Close()
	return func() {
		_ = w.Close()
		_ = cmd.Wait()
	}, nil
}

// buildPlugin builds ./cmd/kubectl-gobrave into binDir.
func buildPlugin(ctx context.Context, root, binDir string) error {
	cmd := groupCommand(ctx, "go", "build", "-o", filepath.Join(binDir, "kubectl-gobrave"), "./cmd/kubectl-gobrave")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build ./cmd/kubectl-gobrave: %w\n%s", err, out)
	}
	return nil
}

// groupCommand is a command in a process group of its own; cancelling ctx sends SIGTERM to the
// whole group (cluster-up.sh then cleans up after itself), SIGKILL 10 s later.
func groupCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseEnv(f)
}

func parseEnv(r io.Reader) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			env[k] = v
		}
	}
	return env, sc.Err()
}
