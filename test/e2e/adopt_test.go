package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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
	// Every field the adopter compares with the pod template the server keeps (and defaults).
	as(colleague, "run", "web", "-n", ns, "--image", "registry.invalid/web:1", "--timeout", "2m",
		"--env", "MODE=x", "--env-secret", "PW=db/pw", "--env-from-secret", "app-env", "--cpu", "0.1", "--memory", "64Mi",
		"--volume", "/srv/web:/srv:ro", "--volume", "/srv/cache:/cache", "--user", "1000:1000", "--port", "80", "--workdir", "/srv",
		"--entrypoint", "/bin/web", "--pull-policy", "Always", "--node-constraint", "kubernetes.io/os Exists")
	as(colleague, "create", "batch", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelHold+"=true", "--security-profile", "restricted")
	waitFor(t, waitTimeout, func() (bool, error) {
		j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "batch", metav1.GetOptions{})
		return err == nil && j.Status.Ready != nil && *j.Status.Ready > 0, err
	})

	r := as(me, "adopt", "-n", ns)
	for _, want := range []string{"deployment.apps/web adopted (k8s-" + ns + "|deployment|web, running, image registry.invalid/web:1)", "job.batch/batch adopted (k8s-" + ns + "|job|batch, running, image registry.invalid/job:1)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("adopt output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := as(me, "adopt", "-n", ns); !strings.Contains(r.stderr, "adopted 0, already known 2, refused 0") {
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

// Issue 14, item 1: a job made by someone who can edit jobs in the namespace, whose pod template is
// busybox echo hi but whose gobrave.dev/spec annotation asks for another image, the node's / and
// uid 0, is refused by adopt and never runs; a record that knows another object of a name keeps
// its UID unless adopt is given --force.
func TestAdoptPlantedAnnotation(t *testing.T) {
	ns := newNamespace(t)
	c := client(t)
	me := []string{"GOBRAVE_HOME=" + t.TempDir()}
	gb := func(args ...string) result { t.Helper(); return runWith(t, runOpts{env: me}, args...) }

	planted := map[string]any{
		"name": "task", "image": "registry.invalid/evil:1", "workloadKind": "job", "command": []string{"echo", "hi"},
		"volumes": []map[string]string{{"source": "/", "target": "/host"}}, "user": "0",
	}
	raw, err := json.Marshal(planted)
	if err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: ns,
			Labels:      map[string]string{"app": "task", "gobrave-workload": "task"},
			Annotations: map[string]string{"gobrave.dev/spec": string(raw)}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "task", "gobrave-workload": "task", labelHold: "true"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "task", Image: "registry.invalid/busybox:1", Args: []string{"echo", "hi"}, ImagePullPolicy: corev1.PullIfNotPresent,
			}}},
		}},
	}
	if _, err := c.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := gb("adopt", "-n", ns)
	line := oneErrorLine(t, r)
	if r.code != 1 || !strings.Contains(line, `job.batch/task not adopted: its gobrave.dev/spec annotation is not a valid spec: volumes[0].source "/": refused`) {
		t.Fatalf("adopt of the planted annotation: %s", r)
	}
	if !strings.Contains(r.stderr, "adopted 0, already known 0, refused 1") {
		t.Errorf("adopt summary: %s", r)
	}
	// Not recorded, so nothing can start it; the planted image never ran.
	if r := gb("start", "k8s-"+ns+"|job|task"); r.code == 0 {
		t.Errorf("start of the refused job: %s", r)
	}
	if r := gb("ps", "-a", "-n", ns, "-o", "name"); r.stdout != "" {
		t.Errorf("records after the refused adopt: %q", r.stdout)
	}
	pods, err := c.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, ct := range p.Spec.Containers {
			if ct.Image == "registry.invalid/evil:1" || len(p.Spec.Volumes) > 0 && p.Spec.Volumes[0].HostPath != nil {
				t.Errorf("pod %s runs the planted spec: %+v", p.Name, p.Spec)
			}
		}
	}

	// A record of another UID: I adopt a colleague's job, the colleague deletes it and makes
	// another of that name; my adopt keeps my record unless --force.
	colleague := []string{"GOBRAVE_HOME=" + t.TempDir()}
	as := func(env []string, args ...string) result {
		t.Helper()
		r := runWith(t, runOpts{env: env}, args...)
		if r.code != 0 {
			t.Fatalf("kubectl gobrave %s: %s", strings.Join(args, " "), r)
		}
		return r
	}
	as(colleague, "create", "batch", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelHold+"=true")
	if r := gb("adopt", "-n", ns); !strings.Contains(r.stdout, "job.batch/batch adopted") {
		t.Fatalf("adopt of the colleague's job: %s", r)
	}
	id := "k8s-" + ns + "|job|batch"
	first, err := c.BatchV1().Jobs(ns).Get(t.Context(), "batch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	as(colleague, "delete", "batch", "-n", ns, "--wait", "--timeout", "2m")
	as(colleague, "create", "batch", "-n", ns, "--kind", "job", "--image", "registry.invalid/job:2", "--label", labelHold+"=true")
	second, err := c.BatchV1().Jobs(ns).Get(t.Context(), "batch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = gb("adopt", "-n", ns)
	if r.code != 1 || !strings.Contains(oneErrorLine(t, r), id+" already records another object (uid "+string(first.UID)+", this one is uid "+string(second.UID)+"); pass --force") {
		t.Errorf("adopt over my record of another UID: %s", r)
	}
	uidOf := func() string {
		t.Helper()
		r := gb("inspect", id, "-o", "json")
		var v struct {
			UID string `json:"uid"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("inspect %s: %v\n%s", id, err, r)
		}
		return v.UID
	}
	if got := uidOf(); got != string(first.UID) {
		t.Errorf("my record's UID after the refused adopt: %q, want %q", got, first.UID)
	}
	r = gb("adopt", "-n", ns, "--force")
	if !strings.Contains(r.stdout, "job.batch/batch adopted ("+id+", ") || !strings.Contains(r.stdout, "image registry.invalid/job:2)") {
		t.Errorf("adopt --force: %s", r)
	}
	if got := uidOf(); got != string(second.UID) {
		t.Errorf("my record's UID after adopt --force: %q, want %q", got, second.UID)
	}
}
