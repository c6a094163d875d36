package cmd_test

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

func TestCreate(t *testing.T) {
	tests := []struct {
		name    string
		config  string // --config file, "" for none
		args    []string
		wantOut string
		// where the object must be: kubeconfig context, namespace, kind, name
		wantCtx, wantNS, wantKind, wantName string
		wantImage                           string
		wantEnv                             []corev1.EnvVar
		wantArgs                            []string
		wantService                         bool
		wantMessage                         string
	}{
		{
			name:    "deployment by default",
			args:    []string{"create", "web", "--image", "nginx:1.27"},
			wantOut: "k8s-default|deployment|web\n",
			wantNS:  "default", wantKind: "deployment", wantName: "web", wantImage: "nginx:1.27",
			wantMessage: "deployment.apps/web created",
		},
		{
			name:    "job with env and command",
			args:    []string{"create", "import", "--kind", "job", "--image", "busybox", "-e", "MODE=full", "--cpu", "0.5", "--memory", "256Mi", "--", "sh", "-c", "echo hi"},
			wantOut: "k8s-default|job|import\n",
			wantNS:  "default", wantKind: "job", wantName: "import", wantImage: "busybox",
			wantEnv:     []corev1.EnvVar{{Name: "MODE", Value: "full"}},
			wantArgs:    []string{"sh", "-c", "echo hi"},
			wantMessage: "job.batch/import created",
		},
		{
			name:    "expose makes web-svc",
			args:    []string{"create", "web", "--image", "nginx:1.27", "--port", "80", "--expose"},
			wantOut: "k8s-default|deployment|web\n",
			wantNS:  "default", wantKind: "deployment", wantName: "web", wantImage: "nginx:1.27",
			wantService: true, wantMessage: "deployment.apps/web created, service/web-svc",
		},
		{
			name:    "-n sets the namespace",
			args:    []string{"create", "web", "--image", "nginx:1.27", "-n", "team-b"},
			wantOut: "k8s-team-b|deployment|web\n",
			wantNS:  "team-b", wantKind: "deployment", wantName: "web", wantImage: "nginx:1.27",
			wantMessage: "deployment.apps/web created",
		},
		{
			name:    "spec file with flags overriding",
			args:    []string{"create", "-f", "testdata/spec-web.yaml", "--image", "nginx:1.28", "--env", "MODE=flag", "--expose"},
			wantOut: "k8s-spec-ns|deployment|web\n",
			wantNS:  "spec-ns", wantKind: "deployment", wantName: "web", wantImage: "nginx:1.28",
			wantEnv:     []corev1.EnvVar{{Name: "KEEP", Value: "yes"}, {Name: "MODE", Value: "flag"}},
			wantService: true, wantMessage: "deployment.apps/web created, service/web-svc",
		},
		{
			name:    "spec file with NAME and -n overriding",
			args:    []string{"create", "other", "-f", "testdata/spec-web.yaml", "-n", "team-b"},
			wantOut: "k8s-team-b|deployment|other\n",
			wantNS:  "team-b", wantKind: "deployment", wantName: "other", wantImage: "nginx:1.27",
			wantEnv:     []corev1.EnvVar{{Name: "KEEP", Value: "yes"}, {Name: "MODE", Value: "file"}},
			wantMessage: "deployment.apps/other created",
		},
		{
			name:    "runtime profile namespace",
			config:  "testdata/config-k3s.yaml",
			args:    []string{"create", "web", "--image", "nginx:1.27"},
			wantOut: "k8s-team-a|deployment|web\n",
			wantNS:  "team-a", wantKind: "deployment", wantName: "web", wantImage: "nginx:1.27",
			wantMessage: "deployment.apps/web created",
		},
		{
			name:    "runtime k3s uses its context and namespace",
			config:  "testdata/config-k3s.yaml",
			args:    []string{"create", "web", "--image", "nginx:1.27", "--runtime", "k3s"},
			wantOut: "k3s-ai|deployment|web\n",
			wantCtx: k3sContext, wantNS: "ai", wantKind: "deployment", wantName: "web", wantImage: "nginx:1.27",
			wantMessage: "deployment.apps/web created",
		},
		{
			name:    "--context wins over the profile's context",
			args:    []string{"create", "web", "--image", "nginx:1.27", "--context", k3sContext},
			wantOut: "k8s-default|deployment|web\n",
			wantCtx: k3sContext, wantNS: "default", wantKind: "deployment", wantName: "web", wantImage: "nginx:1.27",
			wantMessage: "deployment.apps/web created",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.configPath = tt.config
			r := h.run(tt.args...)
			checkExit(t, r, 0, "")
			if diff := cmp.Diff(tt.wantOut, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if r.stderr != "" {
				t.Errorf("stderr: %q, want nothing", r.stderr)
			}
			id := strings.TrimSpace(r.stdout)

			// Only the cluster of the runtime's context was called.
			for name, c := range h.clusters {
				if name != tt.wantCtx && len(c.Actions()) > 0 {
					t.Errorf("context %q got %d requests, want none", name, len(c.Actions()))
				}
			}

			// The cluster objects.
			var uid string
			var pod corev1.PodSpec
			switch tt.wantKind {
			case "deployment":
				d, err := h.deployment(tt.wantCtx, tt.wantNS, tt.wantName)
				if err != nil {
					t.Fatalf("deployment: %v", err)
				}
				uid, pod = string(d.UID), d.Spec.Template.Spec
				if got := *d.Spec.Replicas; got != 1 {
					t.Errorf("replicas %d, want 1", got)
				}
			case "job":
				j, err := h.job(tt.wantCtx, tt.wantNS, tt.wantName)
				if err != nil {
					t.Fatalf("job: %v", err)
				}
				uid, pod = string(j.UID), j.Spec.Template.Spec
			}
			c := pod.Containers[0]
			if c.Image != tt.wantImage {
				t.Errorf("image %q, want %q", c.Image, tt.wantImage)
			}
			if diff := cmp.Diff(tt.wantEnv, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantArgs, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			_, err := h.service(tt.wantCtx, tt.wantNS, tt.wantName+"-svc")
			if got := err == nil; got != tt.wantService {
				t.Errorf("service %s-svc exists: %v, want %v", tt.wantName, got, tt.wantService)
			}

			// The record and its history.
			got := h.ps()
			want := []view{{RuntimeID: id, Runtime: strings.SplitN(id, "-", 2)[0], Namespace: tt.wantNS, Kind: tt.wantKind,
				Name: tt.wantName, UID: uid, State: "created", Message: tt.wantMessage}}
			if diff := cmp.Diff(want, got, cmpIgnoreTimes); diff != "" {
				t.Errorf("ps -o json (-want +got):\n%s", diff)
			}
			// The intent is recorded first; the record's message says it was done.
			intent := "Created: create " + strings.Replace(tt.wantMessage, " created", "", 1)
			if diff := cmp.Diff([]string{intent}, h.history(id)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// The spec is kept with the record (start re-creates jobs from it).
			if w := h.workload(id); w.Spec.Image != tt.wantImage || w.Spec.Name != tt.wantName || w.Spec.RuntimeNamespace != tt.wantNS {
				t.Errorf("recorded spec %+v: want image %q, name %q, runtimeNamespace %q", w.Spec, tt.wantImage, tt.wantName, tt.wantNS)
			}
		})
	}
}

var cmpIgnoreTimes = cmp.FilterPath(func(p cmp.Path) bool {
	s := p.Last().String()
	return s == ".CreatedAt" || s == ".UpdatedAt" || s == ".Time"
}, cmp.Ignore())

func TestCreateOutput(t *testing.T) {
	documented := []string{"createdAt", "exitCode", "finishedAt", "kind", "message", "name", "namespace", "reason", "runtime", "runtimeID", "startedAt", "state", "uid", "updatedAt"}
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			h := newHarness(t)
			before := time.Now().UTC().Truncate(time.Second)
			r := h.run("create", "web", "--image", "nginx:1.27", "-o", format)
			checkExit(t, r, 0, "")
			var fields map[string]any
			if err := yaml.Unmarshal([]byte(r.stdout), &fields); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			var keys []string
			for k := range fields {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if diff := cmp.Diff(documented, keys); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			var v view
			if err := yaml.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Fatal(err)
			}
			d, err := h.deployment("", "default", "web")
			if err != nil {
				t.Fatal(err)
			}
			want := view{RuntimeID: "k8s-default|deployment|web", Runtime: "k8s", Namespace: "default", Kind: "deployment", Name: "web",
				UID: string(d.UID), State: "created", Message: "deployment.apps/web created"}
			if diff := cmp.Diff(want, v, cmpIgnoreTimes); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if v.CreatedAt.Before(before) || v.UpdatedAt.Before(v.CreatedAt) || time.Since(v.CreatedAt) > time.Minute {
				t.Errorf("createdAt %v, updatedAt %v: want now", v.CreatedAt, v.UpdatedAt)
			}
			if format == "json" && !json.Valid([]byte(r.stdout)) {
				t.Errorf("not JSON: %s", r.stdout)
			}
		})
	}
}

// TestCreateAlreadyExists: a name already recorded and not terminal is
// refused before any API call (exit 2); an object of that name made outside
// gobrave is found by the read before the intent (exit 1). Either way the
// database is unchanged and nothing is sent to the cluster but reads.
func TestCreateAlreadyExists(t *testing.T) {
	h := newHarness(t)
	h.ok("create", "web", "--image", "nginx:1.27")
	h.clearActions()
	before, _ := h.snapshot()
	r := h.run("create", "web", "--image", "nginx:1.28")
	checkExit(t, r, 2, "k8s-default|deployment|web is already recorded (state created)")
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	if acts := h.clusters[""].Actions(); len(acts) != 0 {
		t.Errorf("API requests for a refused create: %s", h.describeActions())
	}
	after, _ := h.snapshot()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}

	// Made by someone else: the API refuses, nothing is recorded.
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}}
	if _, err := h.clusters[""].AppsV1().Deployments("default").Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.clearActions()
	r = h.run("create", "other", "--image", "nginx:1.28")
	checkExit(t, r, 1, "already exists")
	after, _ = h.snapshot()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}
	d, _ := h.deployment("", "default", "other")
	if got := len(d.Spec.Template.Spec.Containers); got != 0 {
		t.Errorf("the existing deployment was changed: %d containers", got)
	}
	// Found by the read before the intent: nothing was sent to be created.
	if slices.ContainsFunc(h.clusters[""].Actions(), func(a k8stesting.Action) bool { return a.GetVerb() != "get" }) {
		t.Errorf("requests other than reads: %s", h.describeActions())
	}
}

// TestCreateOtherKindRefused: a name recorded as one kind in a namespace is
// refused as the other kind there (their pods would share the
// gobrave-workload label) with exit code 2, before any API call: nothing is
// created and the database is unchanged. A deleted record, another namespace
// or another cluster does not count.
func TestCreateOtherKindRefused(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		setup    [][]string
		args     []string
		wantCode int
		wantErr  string
	}{
		{
			name:     "job over a deployment",
			setup:    [][]string{{"create", "web", "--image", "nginx:1.27"}},
			args:     []string{"create", "web", "--kind", "job", "--image", "busybox"},
			wantCode: cmd.ExitInvalid,
			wantErr: `create k8s-default|job|web: k8s-default|deployment|web (created) has the same name in namespace default, and a deployment and a job of one name cannot live side by side: ` +
				`delete it first with 'kubectl gobrave delete "k8s-default|deployment|web"' or choose another name`,
		},
		{
			name:     "run of a deployment over a job",
			setup:    [][]string{{"create", "task", "--kind", "job", "--image", "busybox"}},
			args:     []string{"run", "task", "--image", "nginx:1.27"},
			wantCode: cmd.ExitInvalid,
			wantErr:  `create k8s-default|deployment|task: k8s-default|job|task (created) has the same name`,
		},
		{
			name:     "an exited job still counts",
			setup:    [][]string{{"create", "task", "--kind", "job", "--image", "busybox"}, {"stop", "task"}, {"recover", "--once"}},
			args:     []string{"create", "task", "--image", "nginx:1.27", "-o", "json"},
			wantCode: cmd.ExitInvalid,
			wantErr:  `k8s-default|job|task (exited) has the same name`,
		},
		{
			name:     "another runtime on the same context",
			config:   "testdata/config-k3s.yaml",
			setup:    [][]string{{"create", "web", "--runtime", "k3s", "--image", "nginx:1.27"}},
			args:     []string{"create", "web", "--kind", "job", "--image", "busybox", "-n", "ai", "--context", k3sContext},
			wantCode: cmd.ExitInvalid,
			wantErr:  `k3s-ai|deployment|web (created)`,
		},
		{
			name:     "deleted first",
			setup:    [][]string{{"create", "web", "--image", "nginx:1.27"}, {"delete", "web"}},
			args:     []string{"create", "web", "--kind", "job", "--image", "busybox"},
			wantCode: 0,
		},
		{
			name:     "another namespace",
			setup:    [][]string{{"create", "web", "--image", "nginx:1.27", "-n", "other"}},
			args:     []string{"create", "web", "--kind", "job", "--image", "busybox"},
			wantCode: 0,
		},
		{
			name:     "another runtime on another context",
			config:   "testdata/config-k3s.yaml",
			setup:    [][]string{{"create", "web", "--runtime", "k3s", "--image", "nginx:1.27"}},
			args:     []string{"create", "web", "--kind", "job", "--image", "busybox", "-n", "ai"},
			wantCode: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.configPath = tt.config
			for _, args := range tt.setup {
				h.ok(args...)
			}
			h.clearActions()
			before, _ := h.snapshot()
			r := h.run(tt.args...)
			checkExit(t, r, tt.wantCode, tt.wantErr)
			if tt.wantCode == 0 {
				return
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			if strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr %q, want one line", r.stderr)
			}
			for name, c := range h.clusters {
				for _, a := range c.Actions() {
					if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
						t.Errorf("[%s] %s %s: want no writes", name, v, a.GetResource().Resource)
					}
				}
			}
			after, _ := h.snapshot()
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("database changed (-before +after):\n%s", diff)
			}
		})
	}
}
