package e2e

// Selection and printers on the real control plane: -l over the workloads' labels, -l on a
// lifecycle verb acting on exactly the matching workloads, and kubectl's jsonpath and
// custom-columns printers over the objects of -o json.

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSelectE2E(t *testing.T) {
	t.Parallel()
	e := newMonEnv(t)
	c := client(t)
	ids := e.create(
		monDeployment("x-web", "team=x"),
		monJob("x-job", "team=x", labelHold+"=true"),
		monDeployment("other", "team=y"),
		monDeployment("x", "team=y"),
	)
	xWeb, xJob, other, x := ids[0], ids[1], ids[2], ids[3]
	e.runOK("wait", "--for", "started", xWeb, xJob, other, x)

	t.Run("printers", func(t *testing.T) {
		r := e.runOK("ps", "-o", `jsonpath={range .items[*]}{.name}={.state}{"\n"}{end}`)
		if want := "other=running\nx=running\nx-web=running\nx-job=running\n"; r.stdout != want {
			t.Errorf("jsonpath: %q, want %q", r.stdout, want)
		}
		r = e.runOK("ps", "-l", "team=y", "--no-headers", "--sort-by", "{.name}", "-o", "custom-columns=ID:.runtimeID,STATE:.state,CODE:.exitCode")
		want := [][]string{{other, "running", "<none>"}, {x, "running", "<none>"}}
		if got := fieldsOf(r.stdout); !equalRows(got, want) {
			t.Errorf("custom-columns: %q, want %q", got, want)
		}
		r = e.runOK("ps", "-l", "team=x", "--kind", "job", "-o", "go-template={{range .items}}{{.runtimeID}}{{end}}")
		if r.stdout != xJob {
			t.Errorf("go-template with -l team=x --kind job: %q, want %q", r.stdout, xJob)
		}
		r = e.runOK("inspect", xWeb, "-o", "jsonpath={.name} {.inCluster} {.podPhase}")
		if r.stdout != "x-web true Running" {
			t.Errorf("inspect jsonpath: %q", r.stdout)
		}
		// --context: the records made on the cluster that context points at. The suite's
		// gobrave-k3s context points at the same cluster; one that does not exist is bad input.
		r = e.runOK("ps", "--context", "gobrave-k3s", "-l", "team=y", "-o", "name")
		if r.stdout != other+"\n"+x+"\n" {
			t.Errorf("ps --context gobrave-k3s: %q", r.stdout)
		}
		if r := e.run("ps", "--context", "no-such-context"); r.code != 2 || !strings.Contains(r.stderr, "no-such-context") {
			t.Errorf("ps --context no-such-context: %s, want exit 2 naming it", r)
		}
		r = e.run("ps", "-o", "jsonpath={.items[0")
		if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "jsonpath template") {
			t.Errorf("bad jsonpath: want exit 2 and one error line naming it, got %s", r)
		}
	})

	// rm -l removes exactly the matching workloads from the cluster: the deployment and the job
	// of team x, not team y's, nor "x", whose name is only a prefix of theirs.
	r := e.runOK("rm", "-l", "team=x", "--wait", "--timeout", "90s")
	for _, id := range []string{xWeb, xJob} {
		if !strings.Contains(r.stdout, " deleted ("+id+")") {
			t.Errorf("rm -l team=x did not report %s:\n%s", id, r)
		}
	}
	if n := strings.Count(r.stdout, "\n"); n != 2 {
		t.Errorf("rm -l team=x printed %d lines, want 2:\n%s", n, r)
	}
	if _, err := c.AppsV1().Deployments(e.ns).Get(t.Context(), "x-web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment x-web: %v, want NotFound", err)
	}
	if _, err := c.BatchV1().Jobs(e.ns).Get(t.Context(), "x-job", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("job x-job: %v, want NotFound", err)
	}
	for _, name := range []string{"other", "x"} {
		if _, err := c.AppsV1().Deployments(e.ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("deployment %s, not selected, is gone: %v", name, err)
		}
	}
	e.checkStates(map[string]string{xWeb: "deleted", xJob: "deleted", other: "running", x: "running"})

	// rm -l app=x: the label app is the workload's name, so exactly "x".
	r = e.runOK("rm", "-l", "app=x")
	if r.stdout != "deployment.apps/x deleted ("+x+")\n" {
		t.Errorf("rm -l app=x: %s", r)
	}
	// Selecting nothing is not an error.
	r = e.runOK("stop", "-l", "team=nobody")
	if r.stdout != "" || !strings.Contains(r.stderr, "No workloads matched") {
		t.Errorf("stop -l team=nobody: %s", r)
	}
	// --all with IDs is refused before anything is done.
	if r := e.run("stop", "--all", other); r.code != 2 {
		t.Errorf("stop --all ID: %s, want exit 2", r)
	}
	e.checkStates(map[string]string{other: "running"})
}

func fieldsOf(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], " ") != strings.Join(b[i], " ") {
			return false
		}
	}
	return true
}
