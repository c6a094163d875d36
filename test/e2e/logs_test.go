package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLogsMany: two workloads' logs streamed together with [NAME] prefixes, selected by ID and
// by -l over their recorded labels, lines whole; --max-log-requests refusing more streams than it
// allows; and -f following a deployment onto its new pod after `kubectl gobrave restart`.
func TestLogsMany(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	sfx := randomSuffix(t)
	team := "team=logs-" + sfx
	alpha := createID(t, "create", "alpha", "-n", ns, "--image", "registry.invalid/alpha:1", "-l", team)
	beta := createID(t, "create", "beta", "-n", ns, "--image", "registry.invalid/beta:1", "-l", team)
	createID(t, "create", "gamma", "-n", ns, "--image", "registry.invalid/gamma:1", "-l", "team=other-"+sfx)
	for _, id := range []string{alpha, beta} {
		runOK(t, "wait", id, "--for=started", "--timeout", "2m")
	}
	podA := waitPodRunning(t, ns, "gobrave-workload=alpha")
	podB := waitPodRunning(t, ns, "gobrave-workload=beta")
	pathA := usePodLog(t, ns, podA.Name)
	pathB := usePodLog(t, ns, podB.Name)
	firstA := fmt.Sprintf("gobrave-e2e: log of %s/%s", ns, podA.Name)
	firstB := fmt.Sprintf("gobrave-e2e: log of %s/%s", ns, podB.Name)

	t.Run("by ID and by -l, one workload after the other", func(t *testing.T) {
		r := runOK(t, "logs", beta, alpha, "--tail", "-1")
		if want := "[beta] " + firstB + "\n[alpha] " + firstA + "\n"; r.stdout != want {
			t.Errorf("logs BETA ALPHA = %q, want %q", r.stdout, want)
		}
		// -l in -n's namespace, in runtime-ID order; gamma's label does not match.
		r = runOK(t, "logs", "-l", team, "-n", ns, "--tail", "-1")
		if want := "[alpha] " + firstA + "\n[beta] " + firstB + "\n"; r.stdout != want {
			t.Errorf("logs -l %s = %q, want %q", team, r.stdout, want)
		}
		// One workload: as kubectl prints it, unless --prefix.
		if r := runOK(t, "logs", alpha, "--tail", "1"); r.stdout != firstA+"\n" {
			t.Errorf("logs ALPHA = %q", r.stdout)
		}
		if r := runOK(t, "logs", alpha, "--tail", "1", "--prefix"); r.stdout != "[alpha] "+firstA+"\n" {
			t.Errorf("logs ALPHA --prefix = %q", r.stdout)
		}
	})

	t.Run("--max-log-requests refuses more streams", func(t *testing.T) {
		r := run(t, "logs", "-f", "-l", team, "-n", ns, "--max-log-requests", "1")
		if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "raise it with --max-log-requests 2") {
			t.Errorf("logs -f over 2 workloads with --max-log-requests 1: %s; want exit 2 and one line saying to raise it to 2", r)
		}
	})

	t.Run("-f interleaves both, then follows alpha onto its new pod", func(t *testing.T) {
		f := startPlugin(t, "logs", "-f", "-l", team, "-n", ns, "--tail", "1", "--color", "never")
		f.waitOutput(t, "[alpha] "+firstA+"\n")
		f.waitOutput(t, "[beta] "+firstB+"\n")
		// Lines appended to both logs, in turns: each comes out whole under its own prefix.
		var want []string
		for i := 1; i <= 3; i++ {
			a, b := fmt.Sprintf("alpha line %d %s", i, sfx), fmt.Sprintf("beta line %d %s", i, sfx)
			appendLog(t, pathA, a)
			appendLog(t, pathB, b)
			want = append(want, "[alpha] "+a, "[beta] "+b)
		}
		for _, w := range want {
			f.waitOutput(t, w+"\n")
		}
		line := regexp.MustCompile(`^\[(alpha|beta)\] (gobrave-e2e: log of \S+|(alpha|beta) line \d \S+)$`)
		for _, l := range strings.Split(strings.TrimSuffix(f.stdout(), "\n"), "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil || (m[3] != "" && m[1] != m[3]) {
				t.Errorf("line %q is not one whole line under its own workload's prefix", l)
			}
		}

		// Restart alpha: its pod is replaced; the follow moves onto the new pod, whose log is the
		// cluster's shared one (it has no Logs object of its own).
		runOK(t, "restart", alpha, "--wait", "--timeout", "2m")
		var newPod string
		waitFor(t, waitTimeout, func() (bool, error) {
			pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "gobrave-workload=alpha"})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				if p.Name != podA.Name && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					newPod = p.Name
					return true, nil
				}
			}
			return false, fmt.Errorf("no new running pod of alpha yet")
		})
		after := "after the restart of alpha " + sfx
		writePodLog(t, after)
		f.waitOutput(t, "[alpha] "+after+"\n")
		if strings.Contains(f.stdout(), "[beta] "+after) {
			t.Errorf("beta's stream showed the shared log's line:\n%s", f.stdout())
		}
		if err := f.exited(); err != nil {
			t.Errorf("logs -f ended: %v", err)
		}
		t.Logf("followed alpha from pod %s onto %s", podA.Name, newPod)
	})
}
