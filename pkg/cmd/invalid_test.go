package cmd_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seedInvalid records web in default (with web-svc), web in team-b and the
// job task, so that a bare "web" matches two records.
func seedInvalid(t *testing.T, h *harness) {
	t.Helper()
	h.ok("create", "web", "--image", "nginx:1.27", "--port", "80", "--expose")
	h.ok("create", "web", "--image", "nginx:1.27", "-n", "team-b")
	h.ok("create", "task", "--kind", "job", "--image", "busybox")
	h.clearActions()
}

// TestInvalidInput: invalid input exits 2 with a one-line message naming
// the bad value, before any API request and with the database unchanged
// (or not created when there was none).
func TestInvalidInput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		// seededOnly: the input is only invalid against the seeded database.
		seededOnly bool
	}{
		// IDs and names
		{name: "id unknown kind", args: []string{"stop", "k8s-default|deploy|web"}, wantErr: `unknown kind "deploy"`},
		{name: "id unknown runtime", args: []string{"stop", "k9s-default|deployment|web"}, wantErr: `unknown runtime "k9s"`},
		{name: "id two fields", args: []string{"start", "k8s-default|deployment"}, wantErr: `"k8s-default|deployment": want 3 fields`},
		{name: "id bad namespace", args: []string{"pause", "k8s-Team|deployment|web"}, wantErr: `namespace "Team"`},
		{name: "id bad name", args: []string{"resume", "k8s-default|deployment|Web"}, wantErr: `name "Web"`},
		{name: "id without namespace", args: []string{"delete", "k8sdefault|deployment|web"}, wantErr: `"k8sdefault"`},
		{name: "id four fields", args: []string{"events", "k8s-default|job|task|x"}, wantErr: `"k8s-default|job|task|x"`},
		{name: "ref unknown kind", args: []string{"stop", "pod/web"}, wantErr: `unknown kind "pod"`},
		{name: "ref bad name", args: []string{"stop", "deployment/Web_1"}, wantErr: `name "Web_1"`},
		{name: "ref empty name", args: []string{"events", "job/"}, wantErr: `name ""`},
		{name: "bare name with dot", args: []string{"logs", "web.v2"}, wantErr: `"web.v2"`},
		{name: "bare name with space", args: []string{"inspect", "Bad Name"}, wantErr: `"Bad Name"`},
		{name: "bare name upper case", args: []string{"wait", "UPPER", "--for=exited"}, wantErr: `"UPPER"`},
		{name: "bad among good IDs", args: []string{"stop", "web", "task", "k8s-default|pod|web"}, wantErr: `unknown kind "pod"`},
		{name: "bare name of two records", args: []string{"stop", "web"}, wantErr: `"web" matches 2 workloads: k8s-default|deployment|web, k8s-team-b|deployment|web`, seededOnly: true},
		{name: "bare name of two records among good", args: []string{"start", "task", "web"}, wantErr: `"web" matches 2 workloads`, seededOnly: true},

		// arguments
		{name: "stop without ID", args: []string{"stop"}, wantErr: "stop needs at least one ID"},
		{name: "events without ID", args: []string{"events"}, wantErr: "events needs at least one ID"},
		{name: "wait without ID", args: []string{"wait", "--for=exited"}, wantErr: "wait needs at least one ID"},
		{name: "monitor IDs and --all", args: []string{"monitor", "web", "--all"}, wantErr: "give IDs or --all"},
		{name: "logs without ID", args: []string{"logs"}, wantErr: "name at least one workload, or select them with -l"},
		{name: "logs IDs and -l", args: []string{"logs", "web", "-l", "a=b"}, wantErr: "pass IDs or -l a=b, not both"},
		{name: "logs bad selector", args: []string{"logs", "-l", "a=(b"}, wantErr: `-l "a=(b"`},
		{name: "logs bad color", args: []string{"logs", "web", "--color", "yes"}, wantErr: `--color "yes"`},
		{name: "logs max-log-requests 0", args: []string{"logs", "web", "--max-log-requests", "0"}, wantErr: "--max-log-requests 0"},
		{name: "port-forward bad port", args: []string{"port-forward", "web", "80x"}, wantErr: `port "80x": remote port "80x"`},
		{name: "port-forward port too big", args: []string{"port-forward", "web", "8080:70000"}, wantErr: `port "8080:70000"`},
		{name: "port-forward remote 0", args: []string{"port-forward", "web", ":0"}, wantErr: `remote port "0"`},
		{name: "port-forward bad local", args: []string{"port-forward", "web", "x:80"}, wantErr: `local port "x"`},
		{name: "port-forward same local twice", args: []string{"port-forward", "web", "8080:80", "8080:81"}, wantErr: "both listen on local port 8080"},
		{name: "port-forward bad address", args: []string{"port-forward", "web", "80", "--address", "my-host"}, wantErr: `--address "my-host"`},
		{name: "port-forward no port", args: []string{"port-forward", "web"}, wantErr: "requires at least 2 arg(s)"},
		{name: "port-forward zero timeout", args: []string{"port-forward", "web", "80", "--pod-running-timeout", "0s"}, wantErr: "--pod-running-timeout 0s"},
		{name: "inspect two IDs", args: []string{"inspect", "web", "task"}, wantErr: "accepts 1 arg(s), received 2"},
		{name: "ps with an argument", args: []string{"ps", "web"}, wantErr: `"web"`},
		{name: "unknown verb", args: []string{"frobnicate"}, wantErr: `"frobnicate"`},
		{name: "create two names", args: []string{"create", "web", "extra", "--image", "nginx"}, wantErr: `["web" "extra"]`},
		{name: "unknown flag", args: []string{"create", "web", "--image", "nginx", "--bogus"}, wantErr: "unknown flag: --bogus"},

		// timeouts and conditions
		{name: "negative timeout", args: []string{"stop", "web", "--timeout=-1s"}, wantErr: "--timeout -1s"},
		{name: "timeout not a duration", args: []string{"stop", "web", "--timeout=abc"}, wantErr: `"abc"`},
		{name: "zero wait timeout", args: []string{"wait", "web", "--for=exited", "--timeout=0s"}, wantErr: "--timeout 0s"},
		{name: "zero run timeout", args: []string{"run", "web", "--image", "nginx", "--timeout=0s"}, wantErr: "--timeout 0s"},
		{name: "unknown --for", args: []string{"wait", "web", "--for=done"}, wantErr: `--for "done"`},
		{name: "missing --for", args: []string{"wait", "web"}, wantErr: `--for ""`},
		{name: "negative tail", args: []string{"logs", "web", "--tail=-5"}, wantErr: "--tail -5"},
		{name: "negative since", args: []string{"logs", "web", "--since=-1m"}, wantErr: "--since -1m"},

		// output formats
		{name: "ps -o table", args: []string{"ps", "-o", "table"}, wantErr: `"table"`},
		{name: "ps unknown state", args: []string{"ps", "--state", "sleeping"}, wantErr: `--state "sleeping"`},
		{name: "ps unknown runtime", args: []string{"ps", "--runtime", "k9s"}, wantErr: `"k9s"`},
		{name: "inspect -o wide", args: []string{"inspect", "web", "-o", "wide"}, wantErr: `"wide"`},
		{name: "events -o name", args: []string{"events", "web", "-o", "name"}, wantErr: `"name"`},
		{name: "version -o xml", args: []string{"version", "-o", "xml"}, wantErr: `"xml"`},
		{name: "monitor -o yaml", args: []string{"monitor", "web", "-o", "yaml"}, wantErr: `"yaml"`},
		{name: "recover -o yaml", args: []string{"recover", "-o", "yaml"}, wantErr: `"yaml"`},
		{name: "progress deadline not a duration", args: []string{"run", "web", "--image", "nginx", "--progress-deadline", "soon"}, wantErr: `progressDeadline "soon": not a duration`},
		{name: "progress deadline fraction", args: []string{"create", "web", "--image", "nginx", "--progress-deadline", "2.5s"}, wantErr: `progressDeadline "2.5s": must be whole seconds, such as 3s`},
		{name: "progress deadline zero", args: []string{"create", "web", "--image", "nginx", "--progress-deadline", "0s"}, wantErr: `progressDeadline "0s": must be positive`},
		{name: "progress deadline of a job", args: []string{"create", "t", "--image", "nginx", "--kind", "job", "--progress-deadline", "30s"}, wantErr: `only a deployment has a progress deadline`},
		{name: "restart without ID", args: []string{"restart"}, wantErr: "restart needs at least one ID"},
		{name: "wait for a bad condition", args: []string{"wait", "web", "--for=suspended"}, wantErr: `--for "suspended": use started, exited, paused, failed, deleted or terminal`},
		{name: "create -o table", args: []string{"create", "web", "--image", "nginx", "-o", "table"}, wantErr: `"table"`},

		// the container spec from flags
		{name: "name not a label", args: []string{"create", "Web_1", "--image", "nginx"}, wantErr: `name "Web_1"`},
		{name: "no name", args: []string{"create", "--image", "nginx"}, wantErr: "a NAME is required"},
		{name: "no image", args: []string{"create", "web"}, wantErr: "image: required"},
		{name: "image with space", args: []string{"create", "web", "--image", "nginx latest"}, wantErr: `image "nginx latest"`},
		{name: "env without =", args: []string{"create", "web", "--image", "nginx", "--env", "FOO"}, wantErr: `--env "FOO"`},
		{name: "env bad name", args: []string{"create", "web", "--image", "nginx", "-e", "1BAD=x"}, wantErr: `env "1BAD"`},
		{name: "env empty key", args: []string{"create", "web", "--image", "nginx", "-e", "=x"}, wantErr: `--env "=x"`},
		{name: "reserved label", args: []string{"create", "web", "--image", "nginx", "--label", "app=x"}, wantErr: `labels "app"`},
		{name: "memory not a quantity", args: []string{"create", "web", "--image", "nginx", "--memory", "lots"}, wantErr: `memory "lots"`},
		{name: "memory negative", args: []string{"create", "web", "--image", "nginx", "--memory=-1Gi"}, wantErr: `memory "-1Gi"`},
		{name: "cpu negative", args: []string{"create", "web", "--image", "nginx", "--cpu=-1"}, wantErr: "cpu -1"},
		{name: "cpu not a number", args: []string{"create", "web", "--image", "nginx", "--cpu", "abc"}, wantErr: `"abc"`},
		{name: "cpu too small", args: []string{"create", "web", "--image", "nginx", "--cpu", "0.0001"}, wantErr: "cpu 0.0001"},
		{name: "volume relative source", args: []string{"create", "web", "--image", "nginx", "--volume", "data:/data"}, wantErr: `"data"`},
		{name: "volume without target", args: []string{"create", "web", "--image", "nginx", "--volume", "/data"}, wantErr: `--volume "/data"`},
		{name: "volume twice the same target", args: []string{"create", "web", "--image", "nginx", "--volume", "/a:/data", "--volume", "/b:/data/"}, wantErr: `"/data/"`},
		{name: "user not numeric", args: []string{"create", "web", "--image", "nginx", "--user", "root"}, wantErr: `user "root"`},
		{name: "user bad gid", args: []string{"create", "web", "--image", "nginx", "--user", "1000:abc"}, wantErr: `user "1000:abc"`},
		{name: "constraint unknown operator", args: []string{"create", "web", "--image", "nginx", "--node-constraint", "disktype Like ssd"}, wantErr: `"Like"`},
		{name: "constraint without operator", args: []string{"create", "web", "--image", "nginx", "--node-constraint", "gpu"}, wantErr: `"gpu"`},
		{name: "constraint Gt not an integer", args: []string{"create", "web", "--image", "nginx", "--node-constraint", "cores Gt four"}, wantErr: `"four"`},
		{name: "constraint In without values", args: []string{"create", "web", "--image", "nginx", "--node-constraint", "disktype In"}, wantErr: `"disktype In"`},
		{name: "pull policy Never", args: []string{"create", "web", "--image", "nginx", "--pull-policy", "Never"}, wantErr: `"Never"`},
		{name: "pull policy unknown", args: []string{"create", "web", "--image", "nginx", "--pull-policy", "Sometimes"}, wantErr: `"Sometimes"`},
		{name: "port too large", args: []string{"create", "web", "--image", "nginx", "--port", "70000"}, wantErr: "70000"},
		{name: "port negative", args: []string{"create", "web", "--image", "nginx", "--port=-1"}, wantErr: "-1"},
		{name: "port not a number", args: []string{"create", "web", "--image", "nginx", "--port", "http"}, wantErr: `"http"`},
		{name: "expose without port", args: []string{"create", "web", "--image", "nginx", "--expose"}, wantErr: "exposeService: requires exposedPort"},
		{name: "expose a job", args: []string{"create", "web", "--kind", "job", "--image", "busybox", "--port", "80", "--expose"}, wantErr: `workloadKind "job"`},
		{name: "expose not a bool", args: []string{"create", "web", "--image", "nginx", "--expose=maybe"}, wantErr: `"maybe"`},
		{name: "unknown kind", args: []string{"create", "web", "--image", "nginx", "--kind", "pod"}, wantErr: `"pod"`},
		{name: "run unknown kind", args: []string{"run", "web", "--image", "nginx", "--kind", "cronjob"}, wantErr: `"cronjob"`},
		{name: "bad namespace flag", args: []string{"create", "web", "--image", "nginx", "-n", "Bad_NS"}, wantErr: `"Bad_NS"`},
		{name: "unknown runtime flag", args: []string{"create", "web", "--image", "nginx", "--runtime", "k9s"}, wantErr: `"k9s"`},
		{name: "unknown runtime flag on a lookup", args: []string{"stop", "deployment/web", "--runtime", "k9s"}, wantErr: `"k9s"`},
		{name: "unknown runtime flag on a bare name", args: []string{"stop", "task", "--runtime", "k9s"}, wantErr: `"k9s"`},

		// spec files
		{name: "spec unknown field", args: []string{"create", "-f", "testdata/spec-unknown-field.yaml"}, wantErr: `unknown field "imagee"`},
		{name: "spec bad YAML", args: []string{"create", "-f", "testdata/spec-bad-yaml.yaml"}, wantErr: "testdata/spec-bad-yaml.yaml"},
		{name: "spec file missing", args: []string{"create", "-f", "testdata/no-such-spec.yaml"}, wantErr: "testdata/no-such-spec.yaml"},
		{name: "spec file with a bad flag", args: []string{"create", "-f", "testdata/spec-web.yaml", "--memory", "lots"}, wantErr: `memory "lots"`},

		// config files
		{name: "config unknown key", args: []string{"--config", "testdata/config-unknown-key.yaml", "create", "web", "--image", "nginx"}, wantErr: `unknown field "namespaces"`},
		{name: "config unknown runtime", args: []string{"--config", "testdata/config-unknown-runtime.yaml", "create", "web", "--image", "nginx"}, wantErr: `unknown runtime "k9s"`},
		{name: "config bad namespace", args: []string{"--config", "testdata/config-bad-namespace.yaml", "create", "web", "--image", "nginx"}, wantErr: `"Team_A"`},
		{name: "config from GOBRAVE_CONFIG", args: []string{"create", "web", "--image", "nginx"}, env: map[string]string{"GOBRAVE_CONFIG": "testdata/config-unknown-key.yaml"}, wantErr: `unknown field "namespaces"`},
		{name: "config missing", args: []string{"--config", "testdata/no-such-config.yaml", "create", "web", "--image", "nginx"}, wantErr: "testdata/no-such-config.yaml"},
		{name: "config bad on a lookup", args: []string{"--config", "testdata/config-unknown-key.yaml", "stop", "deployment/web"}, wantErr: `unknown field "namespaces"`},
		{name: "config bad on a bare name", args: []string{"--config", "testdata/config-bad-namespace.yaml", "stop", "task"}, wantErr: `"Team_A"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check := func(t *testing.T, h *harness) {
				t.Helper()
				for k, v := range tt.env {
					h.env[k] = v
				}
				r := h.run(tt.args...)
				checkExit(t, r, 2, tt.wantErr)
				if strings.Contains(r.msg, "\n") {
					t.Errorf("the message is not one line: %q", r.msg)
				}
				if want := "error: " + r.msg + "\n"; r.stderr != want {
					t.Errorf("stderr %q, want only %q", r.stderr, want)
				}
				if r.stdout != "" {
					t.Errorf("stdout %q, want nothing", r.stdout)
				}
				if n := h.actions(); n != 0 {
					t.Errorf("%d API requests: %s", n, h.describeActions())
				}
			}
			t.Run("seeded database", func(t *testing.T) {
				h := newHarness(t)
				seedInvalid(t, h)
				before, _ := h.snapshot()
				check(t, h)
				after, _ := h.snapshot()
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("database changed (-before +after):\n%s", diff)
				}
			})
			if tt.seededOnly {
				return
			}
			t.Run("no database", func(t *testing.T) {
				h := newHarness(t)
				check(t, h)
				if _, exists := h.snapshot(); exists {
					t.Errorf("the state database %s was created", h.statePath)
				}
			})
		})
	}
}
