package cmd_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

// --dry-run=client prints the objects and sends nothing; no state file is
// made. A bad value is exit 2.
func TestDryRunClient(t *testing.T) {
	h := newHarness(t)
	out := h.ok("create", "web", "--image", "nginx:1.27", "--port", "80", "--expose", "--dry-run=client", "-o", "yaml")
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := yaml.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "List" || len(list.Items) != 2 || list.Items[0]["kind"] != "Deployment" || list.Items[1]["kind"] != "Service" {
		t.Fatalf("dry run output:\n%s", out)
	}
	if n := h.actions(); n != 0 {
		t.Errorf("a client dry run made %d API requests: %s", n, h.describeActions())
	}
	if _, exists := h.snapshot(); exists {
		t.Error("a client dry run made the state database")
	}
	out = h.ok("run", "task", "--kind", "job", "--image", "busybox", "--dry-run=client", "-o", "json", "--", "echo", "hi")
	var job map[string]any
	if err := json.Unmarshal([]byte(out), &job); err != nil || job["kind"] != "Job" {
		t.Fatalf("run --dry-run=client -o json: %v\n%s", err, out)
	}
	if got := h.ok("create", "web", "--image", "nginx:1.27", "--dry-run=client"); got != "deployment.apps/web created (dry run)\n" {
		t.Errorf("dry run confirmation %q", got)
	}
	r := h.run("create", "web", "--image", "nginx:1.27", "--dry-run=maybe")
	checkExit(t, r, 2, `--dry-run "maybe": must be none, client or server`)
	if strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("not one line: %q", r.stderr)
	}
}

// --dry-run=server sends the objects with dryRun=All and a pod of the
// template; a refusal is exit 1 with the server's reason, and nothing is
// created or recorded either way.
func TestDryRunServer(t *testing.T) {
	h := newHarness(t)
	var dry []string
	h.clusters[""].PrependReactor("create", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		if len(ca.CreateOptions.DryRun) == 0 {
			t.Errorf("a create without dryRun: %s", a.GetResource().Resource)
		}
		dry = append(dry, a.GetResource().Resource)
		return false, nil, nil
	})
	out := h.ok("create", "web", "--image", "nginx:1.27", "--port", "80", "--expose", "--dry-run=server")
	if out != "deployment.apps/web created (server dry run)\nservice/web-svc created (server dry run)\n" {
		t.Errorf("output %q", out)
	}
	if strings.Join(dry, ",") != "pods,deployments,services" {
		t.Errorf("dry-run creates %v, want pods,deployments,services", dry)
	}
	if _, err := h.deployment("", "default", "web"); !apierrors.IsNotFound(err) {
		t.Errorf("the deployment exists after a dry run: %v", err)
	}
	if _, exists := h.snapshot(); exists {
		t.Error("a server dry run made the state database")
	}

	h.clusters[""].PrependReactor("create", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-x", errors.New(`violates PodSecurity "restricted:latest": runAsNonRoot != true`+"\x1b]0;x\x07"))
	})
	r := h.run("create", "web", "--image", "nginx:1.27", "--dry-run=server", "-o", "yaml")
	checkExit(t, r, 1, `its pods would be refused: violates PodSecurity "restricted:latest": runAsNonRoot != true`)
	if strings.Contains(r.stderr, "\x1b") || r.stdout != "" {
		t.Errorf("refusal output: %s", r)
	}
}

// update rolls a service forward and back: the Deployment's image and spec
// annotation follow, history lists the revisions, and an update with no
// change records nothing.
func TestUpdateAndHistory(t *testing.T) {
	h := newHarness(t)
	id := strings.TrimSpace(h.ok("create", "web", "--image", "nginx:1.27"))
	image := func() string {
		d, err := h.deployment("", "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	out := h.ok("update", id, "--image", "nginx:1.28", "--wait=false")
	if out != "deployment.apps/web updated to revision 2 (image nginx:1.27 → nginx:1.28), rolling out ("+id+")\n" {
		t.Errorf("update output %q", out)
	}
	if got := image(); got != "nginx:1.28" {
		t.Errorf("image after update %q", got)
	}
	if got := h.ok("update", "web", "--image", "nginx:1.28"); !strings.HasPrefix(got, "deployment.apps/web unchanged (revision 2") {
		t.Errorf("no-change output %q", got)
	}
	h.ok("update", "web", "--to-revision", "1", "--wait=false")
	if got := image(); got != "nginx:1.27" {
		t.Errorf("image after --to-revision 1: %q", got)
	}
	rows := table(h.ok("history", "web"))
	if len(rows) != 4 || strings.Join(rows[0], " ") != "REVISION CREATED CHANGE" {
		t.Fatalf("history table %v", rows)
	}
	if got := strings.Join(rows[3][2:], " "); got != "back to revision 1: image nginx:1.28 → nginx:1.27 (current)" {
		t.Errorf("last change %q", got)
	}
	var views []struct {
		Revision int  `json:"revision"`
		Current  bool `json:"current"`
		Spec     struct {
			Image string `json:"image"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(h.ok("history", "web", "-o", "json")), &views); err != nil {
		t.Fatal(err)
	}
	if len(views) != 3 || views[1].Spec.Image != "nginx:1.28" || !views[2].Current || views[2].Spec.Image != "nginx:1.27" {
		t.Errorf("history -o json: %+v", views)
	}
	if got := h.ok("history", "web", "--revision", "2"); !strings.Contains(got, "image: nginx:1.28") {
		t.Errorf("history --revision 2:\n%s", got)
	}
	if n := len(h.history(id)); n != 3 {
		t.Errorf("%d events, want Created and two SpecUpdated: %v", n, h.history(id))
	}

	// Bad input: exit 2, nothing sent.
	h.clearActions()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"update", "web"}, "nothing to update"},
		{[]string{"update", "web", "--port", "81"}, "--port cannot be changed by update"},
		{[]string{"update", "web", "--to-revision", "9"}, "has revisions 1 to 3"},
		{[]string{"update", "web", "--to-revision", "1", "--image", "x"}, "--to-revision takes no other spec flag"},
		{[]string{"update", "web", "--cpu", "-1"}, "cpu"},
		{[]string{"update", "web", "--env", "=x"}, "--env"},
	} {
		r := h.run(tt.args...)
		checkExit(t, r, 2, tt.want)
	}
	if n := h.actions(); n != 0 {
		t.Errorf("bad updates made API requests: %s", h.describeActions())
	}
	if n := len(h.history(id)); n != 3 {
		t.Errorf("bad updates recorded events: %v", h.history(id))
	}
}

// A job's update changes its record only; --env KEY- removes a variable.
func TestUpdateJobNextRun(t *testing.T) {
	h := newHarness(t)
	id := strings.TrimSpace(h.ok("create", "task", "--kind", "job", "--image", "busybox", "--env", "A=1", "--env", "B=2"))
	out := h.ok("update", id, "--env", "A-", "--env", "C=3")
	if out != "job.batch/task updated to revision 2 (env -A, +C); its next run (start, restart) uses it ("+id+")\n" {
		t.Errorf("output %q", out)
	}
	j, err := h.job("", "default", "task")
	if err != nil {
		t.Fatal(err)
	}
	if env := j.Spec.Template.Spec.Containers[0].Env; len(env) != 2 || env[0].Name != "A" {
		t.Errorf("the job was changed: %v", env)
	}
	if w := h.workload(id); len(w.Spec.Env) != 2 || w.Spec.Env["C"] != "3" || w.Spec.Env["B"] != "2" {
		t.Errorf("recorded env %v", w.Spec.Env)
	}
}
