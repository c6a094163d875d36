package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// specAnnotationImage is the image in the gobrave.dev/spec annotation of an object.
func specAnnotationImage(t *testing.T, annotations map[string]string) string {
	t.Helper()
	var s struct {
		Image string `json:"image"`
	}
	if err := json.Unmarshal([]byte(annotations["gobrave.dev/spec"]), &s); err != nil {
		t.Fatalf("gobrave.dev/spec annotation %q: %v", annotations["gobrave.dev/spec"], err)
	}
	return s.Image
}

// historyRows runs history ID and returns its rows without the header.
func historyRows(t *testing.T, gb func(...string) result, id string) [][]string {
	t.Helper()
	r := gb("history", id)
	if r.code != 0 {
		t.Fatalf("history: %s", r)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if strings.Join(strings.Fields(lines[0]), " ") != "REVISION CREATED CHANGE" {
		t.Fatalf("history header: %s", r.stdout)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// Issue 15: update rolls a service forward and --to-revision rolls it back. After each step the
// Deployment on the API server has the image in its pod template and its gobrave.dev/spec
// annotation (so adopt sees them agree), the rollout has finished when update returns (the new
// ReplicaSet's pods are the ready ones), an image that cannot be pulled fails fast, history lists
// the revisions, and an update to the spec it has records nothing.
func TestUpdateRollout(t *testing.T) {
	ns := newNamespace(t)
	home := []string{"GOBRAVE_HOME=" + t.TempDir()}
	gb := func(args ...string) result { t.Helper(); return runWith(t, runOpts{env: home}, args...) }
	r := gb("run", "web", "-n", ns, "--image", "registry.invalid/web:1", "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	id := strings.TrimSpace(r.stdout)
	uid := deploymentUID(t, ns, "web")

	check := func(step, image string) {
		t.Helper()
		d := getDeployment(t, ns, "web")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("after %s: the deployment's image is %q, want %q", step, got, image)
		}
		if got := specAnnotationImage(t, d.Annotations); got != image {
			t.Errorf("after %s: the spec annotation's image is %q, want %q", step, got, image)
		}
		if string(d.UID) != uid {
			t.Errorf("after %s: deployment uid %s, want %s (the same object)", step, d.UID, uid)
		}
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.UpdatedReplicas != 1 || st.Replicas != 1 || st.ReadyReplicas != 1 {
			t.Errorf("after %s: update returned before the rollout finished: generation %d observed %d replicas %d updated %d ready %d",
				step, d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas)
		}
		var w struct {
			State string `json:"state"`
		}
		r := gb("inspect", id, "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &w); err != nil || w.State != "running" {
			t.Errorf("after %s: inspect: %v %s", step, err, r)
		}
	}

	r = gb("update", id, "--image", "registry.invalid/web:2", "--timeout", "2m")
	if want := "deployment.apps/web updated to revision 2 (image registry.invalid/web:1 → registry.invalid/web:2), rolled out (" + id + ")\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("update --image: %s\nwant stdout %q", r, want)
	}
	check("update --image", "registry.invalid/web:2")

	// A template whose pod cannot pull its image fails fast, as run does; the old pod serves on.
	r = gb("update", id, "--image", "registry.invalid/web:bad", "--label", "gobrave.test/waiting=ImagePullBackOff", "--timeout", "2m")
	if line := oneErrorLine(t, r); r.code != 1 || !strings.HasPrefix(line, "error: "+id+`: ImagePullBackOff: Back-off pulling image "registry.invalid/web:bad"`) {
		t.Errorf("update to an image that cannot be pulled: %s", r)
	}
	if d := getDeployment(t, ns, "web"); d.Status.ReadyReplicas != 1 || d.Spec.Template.Spec.Containers[0].Image != "registry.invalid/web:bad" {
		t.Errorf("during the stuck rollout: ready %d image %s, want the old pod ready and the new template", d.Status.ReadyReplicas, d.Spec.Template.Spec.Containers[0].Image)
	}

	r = gb("update", id, "--to-revision", "1", "--timeout", "2m")
	if r.code != 0 || !strings.Contains(r.stdout, "updated to revision 4 (back to revision 1: image registry.invalid/web:bad → registry.invalid/web:1; labels -gobrave.test/waiting), rolled out") {
		t.Fatalf("update --to-revision 1: %s", r)
	}
	check("update --to-revision 1", "registry.invalid/web:1")

	r = gb("update", "deployment/web", "-n", ns, "--image", "registry.invalid/web:1")
	if r.code != 0 || r.stdout != "deployment.apps/web unchanged (revision 4, "+id+")\n" {
		t.Errorf("an update with no change: %s", r)
	}
	rows := historyRows(t, gb, id)
	if len(rows) != 4 {
		t.Fatalf("history rows %v, want 4", rows)
	}
	for i, want := range []string{"created", "image registry.invalid/web:1 → registry.invalid/web:2",
		"image registry.invalid/web:2 → registry.invalid/web:bad; labels +gobrave.test/waiting=ImagePullBackOff",
		"back to revision 1: image registry.invalid/web:bad → registry.invalid/web:1; labels -gobrave.test/waiting (current)"} {
		if got := strings.Join(rows[i][2:], " "); rows[i][0] != string(rune('1'+i)) || got != want {
			t.Errorf("history row %d: %v, want revision %d change %q", i+1, rows[i], i+1, want)
		}
	}
	r = gb("history", id, "--revision", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "image: registry.invalid/web:2") {
		t.Errorf("history --revision 2: %s", r)
	}
	r = gb("events", id, "-o", "json")
	if n := strings.Count(r.stdout, `"type": "SpecUpdated"`); r.code != 0 || n != 3 {
		t.Errorf("%d SpecUpdated events, want 3: %s", n, r)
	}
	// adopt agrees: the annotation and the template name the same spec.
	if r := gb("adopt", "-n", ns); r.code != 0 {
		t.Errorf("adopt after the updates: %s", r)
	}
}

// Issue 15: a job's update leaves the run it has alone and its next start makes the job from the
// new spec.
func TestUpdateJobNextRun(t *testing.T) {
	ns := newNamespace(t)
	home := []string{"GOBRAVE_HOME=" + t.TempDir()}
	gb := func(args ...string) result { t.Helper(); return runWith(t, runOpts{env: home}, args...) }
	r := gb("run", "task", "--kind", "job", "-n", ns, "--image", "registry.invalid/job:1", "--env", "MODE=a", "--timeout", "2m", "--", "echo", "hi")
	if r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	id := strings.TrimSpace(r.stdout)
	j, err := getJob(t, ns, "task")
	if err != nil {
		t.Fatal(err)
	}
	first := j.UID
	r = gb("update", id, "--env", "MODE=b", "--image", "registry.invalid/job:2")
	if r.code != 0 || r.stdout != "job.batch/task updated to revision 2 (image registry.invalid/job:1 → registry.invalid/job:2; env ~MODE); its next run (start, restart) uses it ("+id+")\n" {
		t.Fatalf("update of a job: %s", r)
	}
	j, err = getJob(t, ns, "task")
	if err != nil {
		t.Fatal(err)
	}
	if c := j.Spec.Template.Spec.Containers[0]; j.UID != first || c.Image != "registry.invalid/job:1" || c.Env[0].Value != "a" {
		t.Errorf("the finished run was changed: uid %s image %s env %v", j.UID, c.Image, c.Env)
	}
	if r := gb("start", id, "--wait", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("start: %s", r)
	}
	j, err = client(t).BatchV1().Jobs(ns).Get(t.Context(), "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if j.UID == first || c.Image != "registry.invalid/job:2" || len(c.Env) != 1 || c.Env[0].Value != "b" {
		t.Errorf("the next run: uid %s (first %s) image %s env %v; want a new job with job:2 and MODE=b", j.UID, first, c.Image, c.Env)
	}
	if got := specAnnotationImage(t, j.Annotations); got != "registry.invalid/job:2" {
		t.Errorf("the new job's spec annotation image %q", got)
	}
	if rows := historyRows(t, gb, id); len(rows) != 2 {
		t.Errorf("history %v, want 2 revisions", rows)
	}
}
