package e2e

import (
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// dryRunList is the v1 List create --dry-run -o yaml prints for a service with --expose.
type dryRunList struct {
	Kind  string `json:"kind"`
	Items []struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"metadata"`
		Spec struct {
			RevisionHistoryLimit *int32 `json:"revisionHistoryLimit"`
			Template             struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	} `json:"items"`
}

// nothingMade checks that no object named name is in ns and that no record names it.
func nothingMade(t *testing.T, gb func(...string) result, ns, name string) {
	t.Helper()
	c := client(t)
	if _, err := c.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment %s/%s after a dry run: %v", ns, name, err)
	}
	if _, err := c.CoreV1().Services(ns).Get(t.Context(), name+"-svc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service %s/%s-svc after a dry run: %v", ns, name, err)
	}
	if _, err := c.BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("job %s/%s after a dry run: %v", ns, name, err)
	}
	if r := gb("ps", "-a", "-n", ns, "-o", "name"); r.code != 0 || strings.Contains(r.stdout, name) {
		t.Errorf("a dry run was recorded: %s", r)
	}
}

// Issue 15: create --dry-run=client prints the Deployment and Service that would be sent, sends
// nothing and records nothing (the state database is not even made); run --dry-run=client prints
// the Job.
func TestDryRunClient(t *testing.T) {
	ns := newNamespace(t)
	home := t.TempDir()
	gb := func(args ...string) result {
		t.Helper()
		return runWith(t, runOpts{env: []string{"GOBRAVE_HOME=" + home}}, args...)
	}

	r := gb("create", "web", "-n", ns, "--image", "registry.invalid/web:1", "--port", "80", "--expose", "--dry-run=client", "-o", "yaml")
	if r.code != 0 {
		t.Fatalf("create --dry-run=client: %s", r)
	}
	var list dryRunList
	if err := yaml.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if list.Kind != "List" || len(list.Items) != 2 || list.Items[0].Kind != "Deployment" || list.Items[1].Kind != "Service" ||
		list.Items[1].Metadata.Name != "web-svc" || list.Items[0].Spec.Template.Spec.Containers[0].Image != "registry.invalid/web:1" {
		t.Fatalf("create --dry-run=client -o yaml printed:\n%s", r.stdout)
	}
	if list.Items[0].Metadata.UID != "" || list.Items[0].Spec.RevisionHistoryLimit != nil {
		t.Errorf("a client dry run printed server fields:\n%s", r.stdout)
	}
	if entries, err := os.ReadDir(home); err != nil || len(entries) != 0 {
		t.Errorf("a client dry run wrote to GOBRAVE_HOME: %v %v", entries, err)
	}
	r = gb("run", "task", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--dry-run=client", "-o", "json", "--", "echo", "hi")
	if r.code != 0 || !strings.Contains(r.stdout, `"kind": "Job"`) || !strings.Contains(r.stdout, `"echo"`) {
		t.Errorf("run --dry-run=client -o json: %s", r)
	}
	r = gb("create", "web", "-n", ns, "--image", "registry.invalid/web:1", "--dry-run=maybe")
	if r.code != 2 || oneErrorLine(t, r) != `error: --dry-run "maybe": must be none, client or server` {
		t.Errorf("a bad --dry-run: %s", r)
	}
	nothingMade(t, gb, ns, "web")
	nothingMade(t, gb, ns, "task")
}

// Issue 15: --dry-run=server asks the real API server. In a namespace enforcing the restricted
// Pod Security level the default pod template is refused (exit 1, the server's reason, nothing
// made), although the Deployment alone would only draw a warning; in a baseline namespace the
// objects come back as the server would store them (defaults filled in) and nothing exists
// afterwards.
func TestDryRunServer(t *testing.T) {
	restricted := podSecurityNamespace(t, "restricted")
	baseline := podSecurityNamespace(t, "baseline")
	home := []string{"GOBRAVE_HOME=" + t.TempDir()}
	gb := func(args ...string) result { t.Helper(); return runWith(t, runOpts{env: home}, args...) }

	r := gb("create", "plain", "-n", restricted, "--image", "registry.invalid/web:1", "--dry-run=server", "-o", "yaml")
	line := oneErrorLine(t, r)
	if r.code != 1 || r.stdout != "" || !strings.Contains(line, `its pods would be refused: violates PodSecurity "restricted:latest"`) {
		t.Errorf("server dry run in a restricted namespace: %s", r)
	}
	r = gb("run", "plainjob", "--kind", "job", "-n", restricted, "--image", "registry.invalid/job:1", "--dry-run=server")
	if r.code != 1 || !strings.Contains(oneErrorLine(t, r), `violates PodSecurity "restricted:latest"`) {
		t.Errorf("run --dry-run=server of a job in a restricted namespace: %s", r)
	}
	nothingMade(t, gb, restricted, "plain")
	nothingMade(t, gb, restricted, "plainjob")

	r = gb("create", "web", "-n", baseline, "--image", "registry.invalid/web:1", "--port", "80", "--expose", "--dry-run=server", "-o", "yaml")
	if r.code != 0 {
		t.Fatalf("server dry run in a baseline namespace: %s", r)
	}
	var list dryRunList
	if err := yaml.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if list.Kind != "List" || len(list.Items) != 2 || list.Items[0].Kind != "Deployment" || list.Items[1].Kind != "Service" {
		t.Fatalf("create --dry-run=server -o yaml printed:\n%s", r.stdout)
	}
	if l := list.Items[0].Spec.RevisionHistoryLimit; l == nil || *l != 10 {
		t.Errorf("the deployment was not defaulted by the server (revisionHistoryLimit %v):\n%s", l, r.stdout)
	}
	r = gb("create", "web", "-n", baseline, "--image", "registry.invalid/web:1", "--dry-run=server")
	if r.code != 0 || r.stdout != "deployment.apps/web created (server dry run)\n" {
		t.Errorf("server dry run without -o: %s", r)
	}
	nothingMade(t, gb, baseline, "web")
	// The real create then works: the dry run left nothing in the way.
	if r := gb("create", "web", "-n", baseline, "--image", "registry.invalid/web:1"); r.code != 0 {
		t.Errorf("create after the dry runs: %s", r)
	}
}
