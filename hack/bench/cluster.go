package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// cluster is one kwok control plane started by hack/cluster-up.sh for one N.
type cluster struct {
	root       string
	kubeconfig string
	workdir    string
	testbin    string
	audit      *auditLog
	tmp        string   // HOME, kube cache and databases of the processes run
	env        []string // environment of every process run against the cluster
	client     kubernetes.Interface
	seq        atomic.Int64 // numbers the measurement files of the processes run
	serverGC   bool         // -server-gc: see procSpec.settle
}

// startCluster runs hack/cluster-up.sh --audit-log; the caller must call down, also on error.
func startCluster(ctx context.Context, root string, nodes, syncs int) (*cluster, error) {
	c := &cluster{root: root}
	tmp, err := os.MkdirTemp("", "gobrave-bench.")
	if err != nil {
		return nil, err
	}
	c.tmp = tmp
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "cluster-up.sh"),
		"--nodes", fmt.Sprint(nodes), "--disable-qps-limits", "--audit-log", "--no-leader-election", "--controller-syncs", fmt.Sprint(syncs))
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "GOBRAVE_CLUSTER_DIR="+filepath.Join(tmp, "cluster"))
	out, err := cmd.Output()
	// The work folder exists from the first moment: down can clean up whatever started.
	c.workdir = filepath.Join(tmp, "cluster")
	if err != nil {
		return c, fmt.Errorf("hack/cluster-up.sh: %w", err)
	}
	c.kubeconfig = strings.TrimSpace(lastLine(string(out)))
	envFile, err := os.ReadFile(filepath.Join(c.workdir, "cluster.env"))
	if err != nil {
		return c, err
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(envFile))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v
		}
	}
	c.testbin = vars["GOBRAVE_TESTBIN"]
	if vars["GOBRAVE_AUDIT_LOG"] == "" {
		return c, fmt.Errorf("cluster.env has no GOBRAVE_AUDIT_LOG: hack/cluster-up.sh without --audit-log support?")
	}
	c.audit = &auditLog{path: vars["GOBRAVE_AUDIT_LOG"]}

	// Every process run here gets a HOME, kube cache and XDG folders of its own: nothing reads or
	// writes ~/.kube or the user's state database.
	home := filepath.Join(tmp, "home")
	for _, d := range []string{home, filepath.Join(tmp, "kube-cache"), filepath.Join(tmp, "xdg-config"), filepath.Join(tmp, "xdg-data")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return c, err
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "KUBECONFIG", k == "HOME", k == "KUBECACHEDIR", k == "PATH",
			strings.HasPrefix(k, "XDG_"), strings.HasPrefix(k, "GOBRAVE_"):
			continue
		}
		c.env = append(c.env, kv)
	}
	c.env = append(c.env,
		"KUBECONFIG="+c.kubeconfig,
		"HOME="+home,
		"KUBECACHEDIR="+filepath.Join(tmp, "kube-cache"),
		"XDG_CONFIG_HOME="+filepath.Join(tmp, "xdg-config"),
		"XDG_DATA_HOME="+filepath.Join(tmp, "xdg-data"),
		"PATH="+c.testbin+string(os.PathListSeparator)+os.Getenv("PATH"),
	)

	if c.client, err = newClient(c.kubeconfig, "gobrave-bench/1 (setup)"); err != nil {
		return c, err
	}
	return c, nil
}

// newClient is a client of the benchmark itself: rate limits lifted, its own User-Agent.
func newClient(kubeconfig, ua string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = ua
	rc.QPS, rc.Burst = 2000, 2000
	// Protobuf: the setup polls list thousands of objects; JSON would cost the API server more.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(rc)
}

// down removes the cluster and the temporary folder; it runs with a context of its own so that it
// also works after SIGINT.
func (c *cluster) down() {
	if c == nil || c.tmp == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := os.Stat(c.workdir); err == nil {
		cmd := exec.CommandContext(ctx, filepath.Join(c.root, "hack", "cluster-down.sh"), c.workdir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			logf("hack/cluster-down.sh: %v", err)
		}
	}
	if err := os.RemoveAll(c.tmp); err != nil {
		logf("remove %s: %v", c.tmp, err)
	}
}

func (c *cluster) kubectl() string { return filepath.Join(c.testbin, "kubectl") }

// environment describes the machine and the versions, for the report.
func environment(ctx context.Context, o options) map[string]string {
	env := map[string]string{
		"go":   runtime.Version(),
		"cpus": fmt.Sprint(runtime.NumCPU()),
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			env["memory"] = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		env["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := exec.CommandContext(ctx, o.plugin, "version", "--client").Output(); err == nil {
		env["plugin"] = strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ", ")
	}
	if bin, err := exec.CommandContext(ctx, filepath.Join(o.root, "hack", "testbin.sh")).Output(); err == nil {
		dir := strings.TrimSpace(string(bin))
		if b, err := exec.CommandContext(ctx, filepath.Join(dir, "kubectl"), "version", "--client").Output(); err == nil {
			env["kubectl"] = strings.TrimSpace(strings.Split(string(b), "\n")[0])
		}
		if b, err := exec.CommandContext(ctx, filepath.Join(dir, "kwokctl"), "--version").Output(); err == nil {
			env["kwokctl"] = strings.TrimSpace(string(b))
		}
	}
	return env
}

// loadavg is the 1-minute load average.
func loadavg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	fmt.Sscanf(string(b), "%f", &l)
	return l
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
