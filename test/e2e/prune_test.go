package e2e

// prune on the real control plane: it removes the records of deleted workloads only, with
// their history, never a live record, and never touches the cluster (it runs with no
// reachable kubeconfig at all).

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPruneE2E(t *testing.T) {
	t.Parallel()
	e := newMonEnv(t)
	c := client(t)
	ids := e.create(monDeployment("keep"), monDeployment("gone-web"), monJob("gone-job", labelHold+"=true"), monJob("done-job"))
	keep, goneWeb, goneJob, doneJob := ids[0], ids[1], ids[2], ids[3]
	e.runOK("wait", "--for", "started", keep, goneWeb, goneJob)
	e.runOK("wait", "--for", "exited", doneJob)
	e.runOK("rm", goneWeb, goneJob, "--wait", "--timeout", "90s")
	e.waitStates(waitTimeout, map[string]string{goneWeb: "deleted", goneJob: "deleted"})
	keepEvents := len(e.events(keep))

	// prune must not need the cluster: no kubeconfig it could read.
	offline := runOpts{env: append(append([]string{}, e.env...), "KUBECONFIG=/nonexistent/kubeconfig")}
	prune := func(args ...string) result {
		t.Helper()
		r := runWith(t, offline, append([]string{"prune", "-n", e.ns}, args...)...)
		if r.code != 0 {
			t.Fatalf("prune %s: %s", strings.Join(args, " "), r)
		}
		return r
	}

	r := prune("--dry-run")
	for _, id := range []string{goneWeb, goneJob} {
		if !strings.Contains(r.stdout, id+" would be pruned") {
			t.Errorf("dry run does not list %s:\n%s", id, r)
		}
	}
	if !strings.Contains(r.stderr, "would prune 2 deleted records") {
		t.Errorf("dry run count: %s", r)
	}
	if n := len(e.allRecords()); n != 4 {
		t.Fatalf("after the dry run %d records, want 4", n)
	}
	r = prune("--older-than", "7d")
	if r.stdout != "" || !strings.Contains(r.stderr, "pruned 0 deleted records") {
		t.Errorf("--older-than 7d: %s", r)
	}

	r = prune("-o", "name")
	if got := strings.Fields(r.stdout); strings.Join(got, " ") != goneWeb+" "+goneJob {
		t.Errorf("prune -o name: %q, want %s and %s", got, goneJob, goneWeb)
	}
	if !strings.Contains(r.stderr, "pruned 2 deleted records") {
		t.Errorf("prune count: %s", r)
	}
	recs := e.allRecords()
	if len(recs) != 2 || recs[keep].State != "running" || recs[doneJob].State != "exited" {
		t.Errorf("after prune: %+v, want %s running and %s exited only", recs, keep, doneJob)
	}
	if n := len(e.events(keep)); n != keepEvents {
		t.Errorf("history of %s: %d events, was %d", keep, n, keepEvents)
	}
	if r := e.run("events", goneJob); r.code != 1 || !strings.Contains(r.stderr, "is not in the state database") {
		t.Errorf("events of the pruned %s: %s, want not found", goneJob, r)
	}
	// The cluster is untouched: the live deployment and the finished job are still there.
	if _, err := c.AppsV1().Deployments(e.ns).Get(t.Context(), "keep", metav1.GetOptions{}); err != nil {
		t.Errorf("deployment keep: %v", err)
	}
	if _, err := c.BatchV1().Jobs(e.ns).Get(t.Context(), "done-job", metav1.GetOptions{}); err != nil {
		t.Errorf("job done-job: %v", err)
	}
	// The name of a pruned record can be used again: a new record and history.
	e.create(monDeployment("gone-web"))
	if n := len(e.events(goneWeb)); n != 1 {
		t.Errorf("gone-web created again: %d events, want 1 (Created)", n)
	}
}
