package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A teammate on a fresh laptop (another state database) adopts the workloads
// a colleague made and takes over: stop and start work from the adopted records.
func TestAdoptColleaguesWorkloads(t *testing.T) {
	ns := newNamespace(t)
	colleague := []string{"GOBRAVE_HOME=" + t.TempDir()}
	me := []string{"GOBRAVE_HOME=" + t.TempDir()}
	as := func(env []string, args ...string) result {
		t.Helper()
		r := runWith(t, runOpts{env: env}, args...)
		if r.code != 0 {
			t.Fatalf("kubectl gobrave %s: %s", strings.Join(args, " "), r)
		}
		return r
	}
	as(colleague, "run", "web", "-n", ns, "--image", "registry.invalid/web:1", "--timeout", "2m")
	as(colleague, "create", "batch", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelHold+"=true")
	waitFor(t, waitTimeout, func() (bool, error) {
		j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "batch", metav1.GetOptions{})
		return err == nil && j.Status.Ready != nil && *j.Status.Ready > 0, err
	})

	r := as(me, "adopt", "-n", ns)
	for _, want := range []string{"deployment.apps/web adopted (k8s-" + ns + "|deployment|web, running)", "job.batch/batch adopted (k8s-" + ns + "|job|batch, running)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("adopt output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := as(me, "adopt", "-n", ns); !strings.Contains(r.stderr, "adopted 0, already known 2") {
		t.Errorf("second adopt: %s", r)
	}
	// Take over: stop both, run the job again from the adopted spec.
	as(me, "stop", "web", "batch", "--wait", "--timeout", "2m")
	d, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 0 {
		t.Fatalf("web after stop by the adopter: %v, %v", d.Spec.Replicas, err)
	}
	as(me, "start", "batch", "--wait", "--timeout", "2m")
	j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "batch", metav1.GetOptions{})
	if err != nil || j.Spec.Template.Labels[labelHold] != "true" {
		t.Fatalf("job re-created from the adopted spec: %v (labels %v)", err, j.Spec.Template.Labels)
	}
}
