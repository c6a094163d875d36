package cmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"

	authv1 "k8s.io/api/authorization/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// allowRBAC makes the fake answer SelfSubjectAccessReviews, denying the
// (verb, resource) pairs in deny.
func allowRBAC(c *cluster, deny map[string]bool) {
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview).DeepCopy()
		attr := r.Spec.ResourceAttributes
		what := attr.Verb + " " + attr.Resource
		if attr.Subresource != "" {
			what += "/" + attr.Subresource
		}
		r.Status.Allowed = !deny[what]
		return true, r, nil
	})
}

func TestDoctor(t *testing.T) {
	h := newHarness(t)
	allowRBAC(h.clusters[""], nil)
	h.ok("create", "web", "--image", "nginx")
	out := h.ok("doctor")
	okLines := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "ok" {
			okLines[strings.Join(f[1:], " ")] = true
		}
	}
	for _, want := range []string{"kubeconfig", "api server", "rbac delete jobs", "rbac list replicasets", "informer sync", "database integrity", "schema version", "runtime profiles"} {
		found := false
		for line := range okLines {
			found = found || strings.HasPrefix(line, want+" ")
		}
		if !found {
			t.Errorf("doctor output has no ok line for %q:\n%s", want, out)
		}
	}

	// One forbidden verb: a problem naming the verb, resource and namespace, and exit 1.
	h2 := newHarness(t)
	allowRBAC(h2.clusters[""], map[string]bool{"delete jobs": true})
	r := h2.run("doctor", "-n", "team-a", "-o", "json")
	if r.code != 1 {
		t.Fatalf("doctor with a forbidden verb: %v, want exit 1", r)
	}
	var checks []struct {
		Check, Message, Fix string
		OK                  bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, r.stdout)
	}
	var problems []string
	for _, c := range checks {
		if !c.OK {
			problems = append(problems, c.Check+": "+c.Message+" (fix: "+c.Fix+")")
		}
	}
	if len(problems) != 1 || !strings.Contains(problems[0], `rbac delete jobs: forbidden in namespace "team-a"`) || !strings.Contains(problems[0], "docs/rbac.yaml") {
		t.Errorf("problems = %q", problems)
	}
}

// Records of a runtime no profile knows are reported.
func TestDoctorUnknownRuntimePrefix(t *testing.T) {
	h := newHarness(t)
	allowRBAC(h.clusters[""], nil)
	allowRBAC(h.clusters[k3sContext], nil)
	h.configPath = h.writeFile("config.yaml", "defaultRuntime: k8s\nruntimes:\n  k8s: {}\n  k3s: {context: "+k3sContext+"}\n")
	h.ok("create", "ai", "--runtime", "k3s", "--image", "busybox")
	h.configPath = ""
	r := h.run("doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "runtime-ID prefixes with no profile: k3s (1 IDs)") {
		t.Errorf("doctor: %v", r)
	}
}

// doctor judges the database's own files: a 0755 folder around a 0600
// database is healthy (a warning), a database others can write is a problem
// with the fix, and every verb refuses it with exit 2.
func TestDoctorStateFilePermissions(t *testing.T) {
	h := newHarness(t)
	allowRBAC(h.clusters[""], nil)
	h.ok("create", "web", "--image", "nginx")
	dir := filepath.Dir(h.statePath)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := h.run("doctor")
	checkExit(t, r, 0, "")
	if !hasCheck(r.stdout, "warning", "state folder", dir+" is -rwxr-xr-x: other users can list it, not read the database") ||
		!hasCheck(r.stdout, "ok", "database permissions", "state.db -rw-------") {
		t.Errorf("doctor with a 0755 folder:\n%s", r.stdout)
	}

	if err := os.Chmod(h.statePath, 0o666); err != nil {
		t.Fatal(err)
	}
	r = h.run("doctor")
	checkExit(t, r, 1, "doctor found 1 problem(s)")
	if !hasCheck(r.stdout, "problem", "database permissions", h.statePath+" is -rw-rw-rw-: other users can change your records (fix: chmod 600 "+h.statePath+")") {
		t.Errorf("doctor with a 0666 database:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"ps"}, {"create", "db", "--image", "postgres"}} {
		r := h.run(args...)
		checkExit(t, r, 2, "refusing the state database: "+h.statePath+" is -rw-rw-rw-")
		if !strings.Contains(r.msg, "chmod 600 "+h.statePath) {
			t.Errorf("%v: %q does not give the fix", args, r.msg)
		}
	}
	if _, err := h.deployment("", "default", "db"); err == nil {
		t.Error("create made a deployment with a refused state database")
	}
}

// Without HOME (and no GOBRAVE_HOME, XDG_DATA_HOME or --state-db) the state
// database has no place: refused, never a path relative to the working folder.
func TestNoHomeRefused(t *testing.T) {
	h := newHarness(t)
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	f := h.factory()
	f.Home, f.StateDBFlag = "", ""
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs([]string{"ps"})
	err := root.ExecuteContext(t.Context())
	if cmd.ExitCode(err) != 2 || !strings.Contains(cmd.FormatError(err), "set HOME or GOBRAVE_HOME, or pass --state-db") {
		t.Errorf("ps without HOME: exit %d, %v", cmd.ExitCode(err), err)
	}
	if _, err := os.Stat(".local"); err == nil {
		t.Error("a .local folder appeared in the working folder")
	}
}

// hasCheck reports whether doctor's table has a line with the status, the
// check and a message containing msg.
func hasCheck(out, status, check, msg string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, status+" ")
		if !ok {
			continue
		}
		rest, ok = strings.CutPrefix(strings.TrimLeft(rest, " "), check+" ")
		if ok && strings.Contains(rest, msg) {
			return true
		}
	}
	return false
}
