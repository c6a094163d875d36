package cmd_test

import (
	"encoding/json"
	"strings"
	"testing"

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
