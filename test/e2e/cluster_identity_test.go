package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// TestRecordOtherCluster (issue 14, item 4): a record made on the suite's cluster is not acted
// on, nor recorded as deleted, when the current kubeconfig points at another cluster (here a
// server that never answers, which a request would hang on): the verb is refused at once with
// both clusters named, recover and monitors leave it alone with a warning, and back on its
// cluster it works.
func TestRecordOtherCluster(t *testing.T) {
	e := newMonEnv(t)
	ids := e.create(monDeployment("web"))
	id := ids[0]
	e.runOK("wait", "--for=started", id, "--timeout=2m")
	before := e.runOK("events", "-o", "json", id).stdout

	cfg, err := clientcmd.LoadFromFile(harness.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var home string
	for _, c := range cfg.Clusters {
		u, _ := url.Parse(c.Server)
		home = u.Host
	}
	hole := blackHole(t)
	other := kubeconfigFor(t, "https://"+hole)

	for _, verb := range [][]string{{"stop", "web"}, {"delete", "web"}, {"start", "web"}} {
		r := e.run(append(verb, "--kubeconfig", other, "--request-timeout", "20s")...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "the current context points at another cluster") ||
			!strings.Contains(lines[0], home) || !strings.Contains(lines[0], hole) {
			t.Errorf("%s with the kubeconfig of another cluster: %s; want exit 1 and one line naming %s and %s", verb[0], r, home, hole)
		}
	}

	// recover leaves the record alone, says why, and does not wait on the other cluster.
	begin := time.Now()
	r := e.runOK("recover", "--once", "--kubeconfig", other, "--request-timeout", "20s")
	if !strings.Contains(r.stderr, "warning: "+id+" was made on ") || !strings.Contains(r.stderr, "not monitored") {
		t.Errorf("recover on another cluster: %s, want a warning naming %s", r, id)
	}
	if lastLine(r.stdout) != "reattached 0, changed 0, now terminal 0" {
		t.Errorf("recover on another cluster: %q", r.stdout)
	}
	t.Logf("recover --once on the other cluster took %s", time.Since(begin).Round(time.Millisecond))

	if after := e.runOK("events", "-o", "json", id).stdout; after != before {
		t.Errorf("the history changed on another cluster:\nbefore %s\nafter  %s", before, after)
	}
	if got := e.records()[id].State; got != "running" {
		t.Errorf("state %q after verbs on another cluster, want running", got)
	}

	// Back on its own cluster, it works.
	e.runOK("stop", "web", "--wait", "--timeout", "2m")
	if got := e.records()[id].State; got != "exited" {
		t.Errorf("state %q after stop on its own cluster, want exited", got)
	}
}
