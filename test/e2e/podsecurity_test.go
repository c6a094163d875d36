package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podSecurityNamespace is a new namespace whose built-in PodSecurity admission enforces level.
func podSecurityNamespace(t *testing.T, level string) string {
	t.Helper()
	ns := newNamespace(t)
	c := client(t)
	n, err := c.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = level
	n.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := c.CoreV1().Namespaces().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label namespace %s enforce=%s: %v", ns, level, err)
	}
	return ns
}

// oneErrorLine checks that stderr is exactly one "error: " line and returns it.
func oneErrorLine(t *testing.T, r result) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "error: ") {
		t.Errorf("stderr does not end with one error line:\n%s", r.stderr)
	}
	return last
}

// Item 5 of issue 14, on the real kube-apiserver's PodSecurity admission: the defaults pass
// baseline, a hostPath service is refused in baseline before anything is made (PodSecurity
// judges pods, so without the dry run the Deployment would be admitted and its pods refused),
// --security-profile restricted runs in restricted, and the default is refused there with a
// line suggesting the profile.
func TestPodSecurityLevels(t *testing.T) {
	baseline := podSecurityNamespace(t, "baseline")
	restricted := podSecurityNamespace(t, "restricted")
	home := []string{"GOBRAVE_HOME=" + t.TempDir()}
	gb := func(args ...string) result { t.Helper(); return runWith(t, runOpts{env: home}, args...) }
	recorded := func(ns string) string {
		t.Helper()
		r := gb("ps", "-a", "-n", ns, "-o", "name")
		if r.code != 0 {
			t.Fatalf("ps: %s", r)
		}
		return r.stdout
	}

	// The defaults pass baseline: a service runs, a job completes.
	if r := gb("run", "web", "-n", baseline, "--image", "registry.invalid/web:1", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("default run in a baseline namespace: %s", r)
	}
	if r := gb("run", "task", "--kind", "job", "-n", baseline, "--image", "registry.invalid/job:1", "--user", "0", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("default job as uid 0 in a baseline namespace: %s", r)
	}

	// A hostPath service is refused with the server's reason; nothing is created or recorded.
	r := gb("create", "hostpath", "-n", baseline, "--image", "registry.invalid/web:1", "--volume", "/srv/data:/data:ro")
	line := oneErrorLine(t, r)
	if r.code != 1 || !strings.Contains(line, `create deployment "hostpath" in namespace "`+baseline+`": its pods would be refused: violates PodSecurity "baseline:latest": hostPath volumes (volume "vol-0")`) {
		t.Errorf("hostPath service in a baseline namespace: %s", r)
	}
	if _, err := client(t).AppsV1().Deployments(baseline).Get(t.Context(), "hostpath", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused create left its deployment: %v", err)
	}
	if pods, err := client(t).CoreV1().Pods(baseline).List(t.Context(), metav1.ListOptions{LabelSelector: "gobrave-workload=hostpath"}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods of a refused create: %v, %v", pods, err)
	}
	if got := recorded(baseline); strings.Contains(got, "hostpath") {
		t.Errorf("a refused create was recorded: %q", got)
	}
	// The node's / is refused locally, naming the flag that allows it.
	r = gb("create", "root", "-n", baseline, "--image", "registry.invalid/web:1", "--volume", "/:/host")
	if r.code != 2 || !strings.Contains(oneErrorLine(t, r), "--allow-unsafe-host-path") {
		t.Errorf("hostPath / : %s", r)
	}

	// restricted: the profile passes, as a service and as a job.
	if r := gb("run", "web", "-n", restricted, "--image", "registry.invalid/web:1", "--security-profile", "restricted", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("restricted profile in a restricted namespace: %s", r)
	}
	if r := gb("run", "task", "--kind", "job", "-n", restricted, "--image", "registry.invalid/job:1", "--security-profile", "restricted", "--user", "1000", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("restricted job in a restricted namespace: %s", r)
	}
	d, err := client(t).AppsV1().Deployments(restricted).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := d.Spec.Template.Spec.Containers[0].SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("restricted template security context: %+v", sc)
	}

	// The default is refused in restricted, with the hint.
	r = gb("create", "plain", "-n", restricted, "--image", "registry.invalid/web:1")
	line = oneErrorLine(t, r)
	if r.code != 1 || !strings.Contains(line, `its pods would be refused: violates PodSecurity "restricted:latest"`) || !strings.Contains(line, "pass --security-profile restricted") {
		t.Errorf("default in a restricted namespace: %s", r)
	}
	if _, err := client(t).AppsV1().Deployments(restricted).Get(t.Context(), "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused create left its deployment: %v", err)
	}
	if got := recorded(restricted); strings.Contains(got, "plain") {
		t.Errorf("a refused create was recorded: %q", got)
	}
}

// Item 6 of issue 14: a Secret's value reaches the pod through a secretKeyRef, and is nowhere
// in the state database or the spec annotation.
func TestEnvSecret(t *testing.T) {
	ns := newNamespace(t)
	const value = "s3cr3t-e2e-VALUE-8d1f"
	if r := kubectl(t, "create", "secret", "generic", "db-creds", "-n", ns, "--from-literal=password="+value); r.code != 0 {
		t.Fatalf("kubectl create secret: %s", r)
	}
	home := t.TempDir()
	r := runWith(t, runOpts{env: []string{"GOBRAVE_HOME=" + home}}, "create", "task", "--kind", "job", "-n", ns, "--image", "registry.invalid/job:1",
		"--env-secret", "DB_PASSWORD=db-creds/password", "--env-from-secret", "db-creds", "--env", "MODE=plain")
	if r.code != 0 {
		t.Fatalf("create with --env-secret: %s", r)
	}
	j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := j.Spec.Template.Spec.Containers[0]
	var ref bool
	for _, e := range c.Env {
		if e.Name == "DB_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == "db-creds" && e.ValueFrom.SecretKeyRef.Key == "password" && e.Value == "" {
			ref = true
		}
	}
	if !ref || len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "db-creds" {
		t.Errorf("job template env %+v, envFrom %+v: want a secretKeyRef to db-creds/password and envFrom db-creds", c.Env, c.EnvFrom)
	}
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), value) {
		t.Errorf("the secret's value is in the Job (annotation %s)", j.Annotations["gobrave.dev/spec"])
	}
	if !strings.Contains(j.Annotations["gobrave.dev/spec"], `"envSecrets":[{"name":"DB_PASSWORD","secret":"db-creds","key":"password"}]`) {
		t.Errorf("the annotation lacks the reference: %s", j.Annotations["gobrave.dev/spec"])
	}
	files, _ := filepath.Glob(filepath.Join(home, "state.db*"))
	if len(files) == 0 {
		t.Fatalf("no state database in %s", home)
	}
	var all strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), value) {
			t.Errorf("the secret's value is in %s", f)
		}
		all.Write(data)
	}
	// The files are read right: the reference and the plain --env value are there.
	if !strings.Contains(all.String(), "db-creds") || !strings.Contains(all.String(), "plain") {
		t.Errorf("the state database %v holds neither the reference nor the plain value", files)
	}
}

// The namespace's level tightens after the workloads were made. A deployment scaled up again has
// its pods refused by its controller (ReplicaFailure/FailedCreate): start --wait fails at once with
// the server's reason instead of waiting out its timeout. A job's start, which re-creates the job,
// is checked by the dry run and refused before the old run is deleted.
func TestPodSecurityTightened(t *testing.T) {
	ns := newNamespace(t)
	home := []string{"GOBRAVE_HOME=" + t.TempDir()}
	gb := func(o runOpts, args ...string) result {
		t.Helper()
		o.env = home
		return runWith(t, o, args...)
	}
	must := func(args ...string) {
		t.Helper()
		if r := gb(runOpts{}, args...); r.code != 0 {
			t.Fatalf("kubectl gobrave %s: %s", strings.Join(args, " "), r)
		}
	}
	must("run", "web", "-n", ns, "--image", "registry.invalid/web:1", "--volume", "/srv/web:/srv:ro", "--timeout", "2m")
	must("run", "task", "--kind", "job", "-n", ns, "--image", "registry.invalid/job:1", "--volume", "/srv/job:/srv", "--timeout", "2m")
	must("stop", "web", "--wait", "-n", ns, "--timeout", "2m")

	c := client(t)
	n, err := c.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := c.CoreV1().Namespaces().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The wait's own timeout is 10 minutes; the command must end within runOpts' 2 minutes.
	r := gb(runOpts{timeout: 2 * time.Minute}, "start", "web", "-n", ns, "--wait", "--timeout", "10m")
	if r.code != 1 || !strings.Contains(r.stderr, "FailedCreate") || !strings.Contains(r.stderr, `violates PodSecurity "baseline:latest": hostPath volumes`) {
		t.Errorf("start --wait of a deployment whose pods are now refused: %s", r)
	}

	job, err := c.BatchV1().Jobs(ns).Get(t.Context(), "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = gb(runOpts{}, "start", "task", "-n", ns)
	if r.code != 1 || !strings.Contains(oneErrorLine(t, r), `its pods would be refused: violates PodSecurity "baseline:latest": hostPath volumes`) {
		t.Errorf("start of a finished job whose pods are now refused: %s", r)
	}
	after, err := c.BatchV1().Jobs(ns).Get(t.Context(), "task", metav1.GetOptions{})
	if err != nil || after.UID != job.UID {
		t.Errorf("the finished job was replaced or deleted by a refused start: %v", err)
	}
}
