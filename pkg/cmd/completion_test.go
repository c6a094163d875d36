package cmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Directives as cobra prints them after the completions (":N").
const (
	dirNoFile       = ":4"  // ShellCompDirectiveNoFileComp
	dirIDs          = ":36" // NoFileComp | KeepOrder
	dirErrorNoFiles = ":5"  // Error | NoFileComp
)

// complete runs `kubectl gobrave __complete args…` (what kubectl_complete-gobrave
// runs) and returns the completions and the directive line.
func (h *harness) complete(args ...string) (comps []string, directive string) {
	h.t.Helper()
	r := h.run(append([]string{"__complete"}, args...)...)
	checkExit(h.t, r, 0, "")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	directive = lines[len(lines)-1]
	if !strings.HasPrefix(directive, ":") {
		h.t.Fatalf("__complete %q: no directive line:\n%s", args, r)
	}
	if len(lines) > 1 {
		comps = lines[:len(lines)-1]
	}
	return comps, directive
}

// seedStates records, next to web and task (created), web in a second
// namespace (so the bare name web is ambiguous), a job that exited and a
// job that was deleted.
func seedStates(t *testing.T, h *harness) {
	t.Helper()
	seedWebTask(t, h)
	h.ok("create", "web", "-n", "other", "--image", "nginx:1.27")
	h.ok("create", "old", "--kind", "job", "--image", "busybox")
	h.ok("create", "gone", "--kind", "job", "--image", "busybox")
	h.ok("delete", "gone")
	st, err := store.Open(t.Context(), h.statePath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Apply(t.Context(), store.Transition{RuntimeID: "k8s-default|job|old", Type: store.ContainerExited, Message: "exit code 0"}); err != nil {
		t.Fatal(err)
	}
	if got := h.state("k8s-default|job|old"); got != string(store.StateExited) {
		t.Fatalf("old is %s, want exited", got)
	}
	h.clearActions()
}

func TestCompleteIDs(t *testing.T) {
	h := newHarness(t)
	seedStates(t, h)
	nonTerminal := []string{
		"k8s-default|deployment|web\tcreated", // web is ambiguous: no bare name
		"task\tcreated, k8s-default|job|task",
		"k8s-default|job|task\tcreated",
		"k8s-other|deployment|web\tcreated",
	}
	// Terminal ones in the store's order (namespace, kind, name).
	exited := []string{"old\texited, k8s-default|job|old", "k8s-default|job|old\texited"}
	deleted := []string{"gone\tdeleted, k8s-default|job|gone", "k8s-default|job|gone\tdeleted"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}

	tests := []struct {
		name string
		args []string
		want []string
		dir  string
	}{
		{"stop: non-terminal only", []string{"stop", ""}, nonTerminal, dirIDs},
		{"pause", []string{"pause", ""}, nonTerminal, dirIDs},
		{"resume", []string{"resume", ""}, nonTerminal, dirIDs},
		{"restart: terminal ones after", []string{"restart", ""}, cat(nonTerminal, deleted, exited), dirIDs},
		{"events", []string{"events", ""}, nonTerminal, dirIDs},
		{"monitor", []string{"monitor", ""}, nonTerminal, dirIDs},
		{"wait", []string{"wait", "--for=started", ""}, nonTerminal, dirIDs},
		{"logs: finished ones after", []string{"logs", ""}, cat(nonTerminal, exited), dirIDs},
		{"logs: many IDs", []string{"logs", "task", ""}, cat(nonTerminal[:1], nonTerminal[3:], exited), dirIDs},
		{"port-forward", []string{"port-forward", ""}, nonTerminal, dirIDs},
		{"port-forward: nothing for the ports", []string{"port-forward", "task", ""}, nil, dirNoFile},
		{"inspect", []string{"inspect", ""}, nonTerminal, dirIDs},
		{"exec", []string{"exec", "-i", ""}, nonTerminal, dirIDs},
		{"start: terminal ones after", []string{"start", ""}, cat(nonTerminal, deleted, exited), dirIDs},
		{"delete: not the deleted", []string{"delete", ""}, cat(nonTerminal, exited), dirIDs},
		{"rm is delete", []string{"rm", ""}, cat(nonTerminal, exited), dirIDs},
		{"prefix of a name", []string{"start", "o"}, exited[:1], dirIDs},
		{"prefix of an ID", []string{"stop", "k8s-o"}, nonTerminal[3:], dirIDs},
		{"given IDs and names left out", []string{"stop", "task", "k8s-default|deployment|web", ""}, nonTerminal[3:], dirIDs},
		{"one-ID verb: nothing after the ID", []string{"inspect", "task", ""}, nil, dirNoFile},
		{"exec: nothing for the command", []string{"exec", "task", "--", ""}, nil, dirNoFile},
		{"exec: nothing for its arguments", []string{"exec", "task", "--", "ls", ""}, nil, dirNoFile},
		{"wait --for", []string{"wait", "--for", ""}, []string{"started", "exited", "paused", "failed", "deleted", "terminal"}, dirNoFile},
		{"--runtime", []string{"stop", "--runtime", ""}, []string{"k8s", "k3s"}, dirNoFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dir := h.complete(tt.args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("__complete %q (-want +got):\n%s", tt.args, diff)
			}
			if dir != tt.dir {
				t.Errorf("directive %s, want %s", dir, tt.dir)
			}
		})
	}
	if n := h.actions(); n != 0 {
		t.Errorf("ID completion made %d API requests: %s", n, h.describeActions())
	}
}

func TestCompleteIDsQuietly(t *testing.T) {
	t.Run("no database: nothing, and none created", func(t *testing.T) {
		h := newHarness(t)
		got, dir := h.complete("stop", "")
		if len(got) != 0 || dir != dirNoFile {
			t.Errorf("got %q %s, want nothing and %s", got, dir, dirNoFile)
		}
		if _, exists := h.snapshot(); exists {
			t.Error("completion created the state database")
		}
	})
	t.Run("a broken database: the error directive, no message", func(t *testing.T) {
		h := newHarness(t)
		if err := os.MkdirAll(filepath.Dir(h.statePath), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.statePath, []byte(strings.Repeat("not sqlite ", 100)), 0o600); err != nil {
			t.Fatal(err)
		}
		r := h.run("__complete", "stop", "")
		checkExit(t, r, 0, "")
		if r.stdout != dirErrorNoFiles+"\n" {
			t.Errorf("stdout %q, want only %s", r.stdout, dirErrorNoFiles)
		}
		if strings.Contains(r.stderr, "error") {
			t.Errorf("stderr shows an error: %q", r.stderr)
		}
	})
}

func TestCompleteKubeconfigFlags(t *testing.T) {
	h := newHarness(t)
	kc := h.kubeconfig()
	for _, c := range []struct {
		ctxName string
		names   []string
	}{{"", []string{"default", "team-a"}}, {k3sContext, []string{"ai", "kube-system"}}} {
		for _, ns := range c.names {
			_, err := h.clusters[c.ctxName].CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"contexts", []string{"--kubeconfig", kc, "--context", ""}, []string{"k3s-ctx\tcluster k3s", "main\tcluster main"}},
		{"contexts on a verb", []string{"stop", "--kubeconfig", kc, "--context", "m"}, []string{"main\tcluster main"}},
		{"clusters", []string{"ps", "--kubeconfig", kc, "--cluster", ""}, []string{"k3s\thttps://k3s.invalid:6443", "main\thttps://main.invalid:6443"}},
		{"users", []string{"ps", "--kubeconfig", kc, "--user", ""}, []string{"dev"}},
		{"namespaces of the current context", []string{"ps", "-n", ""}, []string{"default", "team-a"}},
		{"namespaces of --context", []string{"ps", "--context", k3sContext, "--namespace", "a"}, []string{"ai"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dir := h.complete(tt.args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("__complete %q (-want +got):\n%s", tt.args, diff)
			}
			if dir != dirNoFile {
				t.Errorf("directive %s, want %s", dir, dirNoFile)
			}
		})
	}

	t.Run("namespaces: an API error is the error directive", func(t *testing.T) {
		r := h.run("__complete", "--context", "nosuch", "-n", "")
		checkExit(t, r, 0, "")
		if r.stdout != dirErrorNoFiles+"\n" {
			t.Errorf("stdout %q, want only %s", r.stdout, dirErrorNoFiles)
		}
	})
}

func TestCompletionCommand(t *testing.T) {
	h := newHarness(t)
	for shell, want := range map[string]string{
		"bash":       "__start_gobrave",
		"zsh":        "#compdef gobrave",
		"fish":       "complete -c gobrave",
		"powershell": "Register-ArgumentCompleter",
	} {
		t.Run(shell, func(t *testing.T) {
			r := h.run("completion", shell)
			checkExit(t, r, 0, "")
			if !strings.Contains(r.stdout, want) {
				t.Errorf("completion %s does not contain %q", shell, want)
			}
			r = h.run("completion", shell, "--help")
			checkExit(t, r, 0, "")
			for _, want := range []string{"Usage:\n  kubectl gobrave completion " + shell, "kubectl_complete-gobrave", "source <(kubectl gobrave completion", "alias gobrave='kubectl gobrave'"} {
				if shell == "fish" || shell == "powershell" {
					want = strings.Replace(want, "source <(kubectl gobrave completion", "kubectl gobrave completion "+shell+" |", 1)
					want = strings.Replace(want, "alias gobrave='kubectl gobrave'", "gobrave", 1)
				}
				if !strings.Contains(r.stdout, want) {
					t.Errorf("completion %s --help does not contain %q:\n%s", shell, want, r.stdout)
				}
			}
		})
	}
	r := h.run("completion", "--help")
	checkExit(t, r, 0, "")
	for _, want := range []string{"Usage:\n  kubectl gobrave completion [flags]\n  kubectl gobrave completion [command]", "kubectl_complete-gobrave", "make install"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completion --help does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\n  gobrave ") || strings.Contains(r.stdout, "<(gobrave") {
		t.Errorf("completion --help names the command without kubectl:\n%s", r.stdout)
	}
	r = h.run("completion", "tcsh")
	checkExit(t, r, 2, `unknown command "tcsh" for "kubectl gobrave completion"`)
	if _, exists := h.snapshot(); exists {
		t.Error("completion created the state database")
	}
}
