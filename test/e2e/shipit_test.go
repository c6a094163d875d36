package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestShipCompletion completes through the real kubectl: `kubectl __complete gobrave …` finds
// hack/completion/kubectl_complete-gobrave on PATH, which asks the plugin.
func TestShipCompletion(t *testing.T) {
	requireCluster(t)
	ns := newNamespace(t)
	// A store of its own, so the lists are exactly this test's IDs.
	home := "GOBRAVE_HOME=" + t.TempDir()
	path := "PATH=" + filepath.Join(harness.root, "hack", "completion") + string(os.PathListSeparator) + os.Getenv("PATH")
	plugin := func(args ...string) result {
		t.Helper()
		r := runWith(t, runOpts{env: []string{home}}, args...)
		if r.code != 0 {
			t.Fatalf("kubectl gobrave %s: %s", strings.Join(args, " "), r)
		}
		return r
	}
	complete := func(args ...string) []string {
		t.Helper()
		r := execute(t, runOpts{env: []string{home, path}}, "kubectl", append([]string{"__complete", "gobrave"}, args...)...)
		if r.code != 0 {
			t.Fatalf("kubectl __complete gobrave %q: %s", args, r)
		}
		return strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	}

	web := strings.TrimSpace(plugin("run", "web", "-n", ns, "--image", "registry.invalid/web:1", "--timeout", "2m").stdout)
	once := strings.TrimSpace(plugin("run", "once", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--timeout", "2m").stdout)
	plugin("wait", once, "--for=exited", "--timeout", "2m")

	t.Run("stop offers the running workload", func(t *testing.T) {
		want := []string{"web\trunning, " + web, web + "\trunning", ":36"}
		if got := complete("stop", ""); !slices.Equal(got, want) {
			t.Errorf("kubectl __complete gobrave stop \"\" = %q, want %q", got, want)
		}
	})
	t.Run("start offers the exited job after it", func(t *testing.T) {
		want := []string{"web\trunning, " + web, web + "\trunning", "once\texited, " + once, once + "\texited", ":36"}
		if got := complete("start", ""); !slices.Equal(got, want) {
			t.Errorf("kubectl __complete gobrave start \"\" = %q, want %q", got, want)
		}
	})
	t.Run("contexts from the kubeconfig", func(t *testing.T) {
		got := complete("--context", "")
		var names []string
		for _, line := range got[:len(got)-1] {
			names = append(names, strings.SplitN(line, "\t", 2)[0])
		}
		slices.Sort(names) // gobrave-k3s, kwok-<cluster>
		if len(names) != 2 || names[0] != "gobrave-k3s" || !strings.HasPrefix(names[1], "kwok-") {
			t.Errorf("kubectl __complete gobrave --context \"\" = %q, want kwok-<cluster> and gobrave-k3s", got)
		}
		if got[len(got)-1] != ":4" {
			t.Errorf("directive %s, want :4 (no files)", got[len(got)-1])
		}
	})
	t.Run("namespaces from the cluster", func(t *testing.T) {
		got := complete("ps", "-n", ns[:len(ns)-3])
		if want := []string{ns, ":4"}; !slices.Equal(got, want) {
			t.Errorf("kubectl __complete gobrave ps -n %s = %q, want %q", ns[:len(ns)-3], got, want)
		}
	})
	t.Run("the completion command", func(t *testing.T) {
		r := runOK(t, "completion", "bash")
		if !strings.Contains(r.stdout, "__start_gobrave") {
			t.Errorf("kubectl gobrave completion bash printed no bash completion script:\n%.300s", r.stdout)
		}
	})
}

// TestShipExec runs commands in a workload's pod. The cluster's pods run exec'd commands on this
// host (ClusterExec, docs/testing.md); a failing command comes back as an error there, not as its
// exit code, so only "non-zero" is asserted (exit-code passing is unit-tested).
func TestShipExec(t *testing.T) {
	requireCluster(t)
	ns := newNamespace(t)
	r := runOK(t, "run", "shell", "-n", ns, "--image", "registry.invalid/shell:1", "--timeout", "2m")
	id := strings.TrimSpace(r.stdout)

	t.Run("echo hi", func(t *testing.T) {
		r := runOK(t, "exec", id, "--", "echo", "hi")
		if r.stdout != "hi\n" {
			t.Errorf("exec echo hi printed %q: %s", r.stdout, r)
		}
	})
	t.Run("by kind/name, stdout and stderr apart", func(t *testing.T) {
		r := runOK(t, "exec", "deployment/shell", "-n", ns, "--", "sh", "-c", "echo out; echo err >&2")
		if r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
			t.Errorf("exec printed stdout %q, stderr %q", r.stdout, r.stderr)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		// One line, not cat to EOF: the end of stdin does not reach kwok's exec'd process
		// (`kubectl exec -i POD -- cat` never returns there either).
		r := runWith(t, runOpts{stdin: "piped line\nnot read\n"}, "exec", "-i", id, "--", "head", "-n", "1")
		if r.code != 0 || r.stdout != "piped line\n" {
			t.Errorf("exec -i head -n 1: %s", r)
		}
	})
	t.Run("-t without a terminal warns and runs", func(t *testing.T) {
		r := runWith(t, runOpts{stdin: "x\n"}, "exec", "-it", id, "--", "echo", "tty")
		if r.code != 0 || r.stdout != "tty\n" || !strings.Contains(r.stderr, "Unable to use a TTY - input is not a terminal") {
			t.Errorf("exec -it from a pipe: %s", r)
		}
	})
	t.Run("a failing command", func(t *testing.T) {
		r := run(t, "exec", id, "--", "false")
		if r.code == 0 {
			t.Errorf("exec false exited 0: %s", r)
		}
		if !strings.HasPrefix(r.stderr, "error: exec "+id) {
			t.Errorf("stderr %q does not start with error: exec %s", r.stderr, id)
		}
	})
	t.Run("usage errors exit 2", func(t *testing.T) {
		r := run(t, "exec", id, "echo", "hi")
		if r.code != 2 || !strings.Contains(r.stderr, "exec needs the command after --") {
			t.Errorf("exec without --: %s", r)
		}
	})
}
