package cmd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seedSelect records four workloads with labels, one of them deleted.
func seedSelect(t *testing.T, h *harness) {
	t.Helper()
	h.ok("create", "web", "--image", "nginx:1.27", "-l", "team=web", "-l", "tier=front")
	h.ok("create", "api", "--image", "nginx:1.27", "-l", "team=web", "-n", "team-a")
	h.ok("create", "etl", "--kind", "job", "--image", "busybox", "-l", "team=data")
	h.ok("create", "old", "--kind", "job", "--image", "busybox", "-l", "team=data")
	h.ok("delete", "job/old")
}

func ids(vs []view) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.RuntimeID)
	}
	return out
}

const (
	selWeb = "k8s-default|deployment|web"
	selAPI = "k8s-team-a|deployment|api"
	selETL = "k8s-default|job|etl"
	selOld = "k8s-default|job|old"
)

func TestPsSelection(t *testing.T) {
	h := newHarness(t)
	seedSelect(t, h)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-l", "team=web"}, []string{selWeb, selAPI}},
		{[]string{"-l", "team=data"}, []string{selETL}},
		{[]string{"-l", "team=data", "-a"}, []string{selETL, selOld}},
		{[]string{"-l", "team in (data,web),tier!=front"}, []string{selETL, selAPI}},
		{[]string{"-l", "app=web"}, []string{selWeb}},
		{[]string{"-l", "!tier"}, []string{selETL, selAPI}},
		{[]string{"--kind", "job", "-a"}, []string{selETL, selOld}},
		{[]string{"--kind", "service"}, []string{selWeb, selAPI}},
		{[]string{"--kind", "task"}, []string{selETL}},
		{[]string{"--kind", "deploy", "-n", "team-a"}, []string{selAPI}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ids(h.ps(tt.args...))); diff != "" {
				t.Errorf("ps %s (-want +got):\n%s", tt.args, diff)
			}
		})
	}
	for _, bad := range [][]string{{"-l", "team in (a"}, {"--kind", "pod"}, {"--state", "gone"}, {"-o", "jsonpath"}, {"-o", "jsonpath={.items[0"},
		{"-o", "go-template={{.x"}, {"-o", "custom-columns=ID"}, {"-o", "jsonpath-file=/nonexistent"}, {"--sort-by", "{.a"}, {"-w", "-o", "yaml"}} {
		r := h.run(append([]string{"ps"}, bad...)...)
		checkExit(t, r, 2, "")
		if r.stdout != "" || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("ps %q: want one error line and no output, got\n%s", bad, r)
		}
	}
}

func TestPsContext(t *testing.T) {
	h := newHarness(t)
	h.clusterIDs = map[string]string{"": "https://a:6443 (ca sha256:aaaa)", k3sContext: "https://b:6443 (ca sha256:bbbb)"}
	h.ok("create", "web", "--image", "nginx:1.27")
	if got := ids(h.ps("--context", k3sContext)); len(got) != 0 {
		t.Errorf("ps --context %s: %v, want none (web was made on the other cluster)", k3sContext, got)
	}
	h.clusterIDs[k3sContext] = h.clusterIDs[""]
	if diff := cmp.Diff([]string{selWeb}, ids(h.ps("--context", k3sContext))); diff != "" {
		t.Errorf("ps --context on the same cluster (-want +got):\n%s", diff)
	}
}

func TestPsPrinters(t *testing.T) {
	h := newHarness(t)
	seedSelect(t, h)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-o", "jsonpath={.items[*].runtimeID}"}, selWeb + " " + selETL + " " + selAPI},
		{[]string{"-o", `jsonpath={range .items[*]}{.name}={.state}{"\n"}{end}`, "-a"}, "web=created\netl=created\nold=deleted\napi=created\n"},
		{[]string{"-o", "jsonpath-file=" + file("jp", "{.kind} {.items[0].namespace}")}, "List default"},
		{[]string{"-o", "go-template={{range .items}}{{.name}} {{end}}"}, "web etl api "},
		{[]string{"-o", "go-template-file=" + file("gt", "{{len .items}}")}, "3"},
		{[]string{"-o", "custom-columns=ID:.runtimeID,KIND:kind,CODE:.exitCode"}, "ID                           KIND         CODE\n" +
			selWeb + "   deployment   <none>\n" + selETL + "          job          <none>\n" + selAPI + "    deployment   <none>\n"},
		{[]string{"-o", "custom-columns=NAME:.name", "--no-headers", "--sort-by", "{.name}"}, "api\netl\nweb\n"},
		{[]string{"-o", "custom-columns-file=" + file("cc", "NAME   NS\n.name  .namespace\n"), "-l", "team=web"}, "NAME   NS\nweb    default\napi    team-a\n"},
		{[]string{"-o", "name", "--sort-by", ".name", "-a"}, selAPI + "\n" + selETL + "\n" + selOld + "\n" + selWeb + "\n"},
		{[]string{"--no-headers", "-l", "app=web", "--show-labels"}, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := h.run(append([]string{"ps"}, tt.args...)...)
			checkExit(t, r, 0, "")
			if tt.want == "" {
				return
			}
			if diff := cmp.Diff(tt.want, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("show-labels", func(t *testing.T) {
		rows := table(h.ok("ps", "--show-labels", "-l", "app=web"))
		if diff := cmp.Diff([]string{"LABELS", "app=web,gobrave-workload=web,team=web,tier=front"}, column(rows, 4)); diff != "" {
			t.Errorf("LABELS (-want +got):\n%s", diff)
		}
		rows = table(h.ok("ps", "--no-headers", "-l", "app=web"))
		if len(rows) != 1 || rows[0][0] != selWeb {
			t.Errorf("--no-headers: %q", rows)
		}
	})
	t.Run("sort-by json", func(t *testing.T) {
		if diff := cmp.Diff([]string{selAPI, selETL, selOld, selWeb}, ids(h.ps("-a", "--sort-by", ".name"))); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("json stays an array", func(t *testing.T) {
		out := h.ok("ps", "-a", "-o", "json")
		var vs []map[string]any
		if err := json.Unmarshal([]byte(out), &vs); err != nil || len(vs) != 4 {
			t.Fatalf("%v, %d objects\n%s", err, len(vs), out)
		}
		var canon bytes.Buffer
		if err := json.Indent(&canon, []byte(out), "", "  "); err != nil || canon.String() != out {
			t.Errorf("streamed -o json differs from json.MarshalIndent:\n%s", out)
		}
		if out := h.ok("ps", "-o", "json", "--kind", "job", "-l", "x=y"); out != "[]\n" {
			t.Errorf("empty: %q", out)
		}
	})
}

func TestEventsInspectPrinters(t *testing.T) {
	h := newHarness(t)
	seedSelect(t, h)
	if got := h.ok("events", "old", "-o", "jsonpath={.items[*].type}"); got != "Created DeleteRequested ContainerDeleted" {
		t.Errorf("events jsonpath: %q", got)
	}
	if got := h.ok("events", "old", "--no-headers", "-o", "custom-columns=TYPE:.type,REASON:.reason", "--sort-by", ".type"); got != "ContainerDeleted   Deleted\nCreated            \nDeleteRequested    Deleted\n" {
		t.Errorf("events custom-columns: %q", got)
	}
	if got := h.ok("inspect", "web", "-o", "jsonpath={.runtimeID} {.inCluster}"); got != selWeb+" true" {
		t.Errorf("inspect jsonpath: %q", got)
	}
	if got := h.ok("inspect", "web", "-o", "go-template={{.name}}/{{.kind}}"); got != "web/deployment" {
		t.Errorf("inspect go-template: %q", got)
	}
	r := h.run("inspect", "web", "-o", "jsonpath={.a")
	checkExit(t, r, 2, "jsonpath template")
}

func TestLifecycleSelection(t *testing.T) {
	h := newHarness(t)
	seedSelect(t, h)
	r := h.run("stop", "-l", "team=web")
	checkExit(t, r, 0, "")
	want := "deployment.apps/web stopped (" + selWeb + ")\ndeployment.apps/api stopped (" + selAPI + ")\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stop -l team=web (-want +got):\n%s", diff)
	}
	if s := h.state(selETL); s != "created" {
		t.Errorf("etl: %s, want created (not selected)", s)
	}
	r = h.run("delete", "--all", "--kind", "job")
	checkExit(t, r, 0, "")
	if r.stdout != "job.batch/etl deleted ("+selETL+")\n" {
		t.Errorf("delete --all --kind job: %q (the deleted old must be left out)", r.stdout)
	}
	if _, err := h.job("", "default", "etl"); err == nil {
		t.Errorf("job etl still in the cluster")
	}
	r = h.run("start", "-l", "team=nobody")
	checkExit(t, r, 0, "")
	if r.stdout != "" || !strings.Contains(r.stderr, "No workloads matched") {
		t.Errorf("nothing selected: %s", r)
	}
	for _, bad := range [][]string{{"stop", "--all", "web"}, {"stop", "--state", "exited"}, {"stop"}, {"stop", "-l", "a in (b"}, {"rm", "--all", "--state", "nope"}} {
		r := h.run(bad...)
		checkExit(t, r, 2, "")
	}
	// --all with the state filter, across namespaces.
	r = h.run("rm", "--all", "--state", "exited")
	checkExit(t, r, 0, "")
	if strings.Count(r.stdout, " deleted (") != 2 {
		t.Errorf("rm --all --state exited: %q", r.stdout)
	}
}

func TestPrune(t *testing.T) {
	h := newHarness(t)
	seedSelect(t, h)
	r := h.run("prune", "--dry-run")
	checkExit(t, r, 0, "")
	if !strings.HasPrefix(r.stdout, selOld+" would be pruned (deleted ") || !strings.Contains(r.stderr, "would prune 1 deleted records (3 events)") {
		t.Errorf("dry run: %s", r)
	}
	if got := ids(h.ps("-a", "--state", "deleted")); len(got) != 1 {
		t.Errorf("dry run removed: %v", got)
	}
	r = h.run("prune", "--older-than", "7d")
	checkExit(t, r, 0, "")
	if r.stdout != "" || !strings.Contains(r.stderr, "pruned 0 deleted records") {
		t.Errorf("--older-than 7d: %s", r)
	}
	r = h.run("prune", "-o", "name")
	checkExit(t, r, 0, "")
	if r.stdout != selOld+"\n" {
		t.Errorf("prune: %s", r)
	}
	if diff := cmp.Diff([]string{selWeb, selETL, selAPI}, ids(h.ps("-a"))); diff != "" {
		t.Errorf("after prune (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"7", "-1h", "xd", "1d-2h"} {
		checkExit(t, h.run("prune", "--older-than", bad), 2, "--older-than")
	}
	checkExit(t, h.run("prune", "--older-than", "1d12h"), 0, "")
}

func TestWaitSelection(t *testing.T) {
	h := newHarness(t)
	seedSelect(t, h)
	r := h.run("wait", "-l", "team=data", "--for", "terminal", "--state", "deleted", "--timeout", "5s")
	checkExit(t, r, 0, "")
	if r.stdout != "job.batch/old condition met (terminal)\n" {
		t.Errorf("wait -l team=data --state deleted: %s", r)
	}
	r = h.run("wait", "-l", "team=nobody", "--for", "started")
	checkExit(t, r, 0, "")
	if !strings.Contains(r.stderr, "No workloads matched: nothing to wait for") {
		t.Errorf("nothing selected: %s", r)
	}
	checkExit(t, h.run("wait", "--all", "web", "--for", "started"), 2, "not both")
	checkExit(t, h.run("wait", "--kind", "job", "--for", "started"), 2, "add --all or -l")
}

func TestPruneNamespace(t *testing.T) {
	h := newHarness(t)
	h.ok("create", "a", "--image", "nginx:1.27", "-n", "team-a")
	h.ok("create", "b", "--image", "nginx:1.27", "-n", "team-b")
	h.ok("delete", "a", "b")
	r := h.run("prune", "-n", "team-a", "-o", "name")
	checkExit(t, r, 0, "")
	if r.stdout != "k8s-team-a|deployment|a\n" {
		t.Errorf("prune -n team-a: %s", r)
	}
	if got := ids(h.ps("-a")); len(got) != 1 || got[0] != "k8s-team-b|deployment|b" {
		t.Errorf("after prune -n team-a: %v", got)
	}
}

func TestTemplateRunErrors(t *testing.T) {
	h := newHarness(t)
	seedSelect(t, h)
	for _, tt := range []struct{ output, want string }{
		{"jsonpath={.items[7]}", `jsonpath template "{.items[7]}": array index out of bounds: index 7, length 3`},
		{"go-template={{index .items 7}}", `go-template "{{index .items 7}}": template: output:1:2: executing "output" at <index .items 7>: error calling index: index out of range: 7`},
	} {
		r := h.run("ps", "-o", tt.output)
		checkExit(t, r, 2, tt.want)
		if r.stdout != "" {
			t.Errorf("-o %s printed %q", tt.output, r.stdout)
		}
	}
}
