package cmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// A colleague's workloads, made with the same builder the plugin uses,
// are imported with their current state and spec.
func TestAdopt(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	c := h.clusters[""]
	web, err := runtime.Build(spec.ContainerSpec{Name: "web", Image: "nginx:1.27", ExposedPort: 80}, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	web.Deployment.UID = "uid-web"
	web.Deployment.Status.ReadyReplicas, web.Deployment.Status.Replicas = 1, 1
	if _, err := c.AppsV1().Deployments("team-a").Create(ctx, web.Deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	task, err := runtime.Build(spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job", Command: []string{"echo", "hi"}}, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	task.Job.UID = "uid-task"
	task.Job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := c.BatchV1().Jobs("team-a").Create(ctx, task.Job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not ours: no gobrave-workload label.
	if _, err := c.BatchV1().Jobs("team-a").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	out := h.ok("adopt", "-n", "team-a")
	want := "deployment.apps/web adopted (k8s-team-a|deployment|web, running, image nginx:1.27)\njob.batch/task adopted (k8s-team-a|job|task, exited, image busybox)\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("adopt output (-want +got):\n%s", diff)
	}
	if got := h.state("k8s-team-a|deployment|web"); got != "running" {
		t.Errorf("web state %q", got)
	}
	w := h.workload("k8s-team-a|job|task")
	if w.State != "exited" || w.UID != "uid-task" || strings.Join(w.Spec.Command, " ") != "echo hi" {
		t.Errorf("task record = %+v", w)
	}
	if got := h.history("k8s-team-a|job|task"); len(got) != 1 || !strings.HasPrefix(got[0], "Adopted") {
		t.Errorf("task history = %v", got)
	}
	// A second adopt knows them already.
	r := h.run("adopt", "-n", "team-a")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "adopted 0, already known 2, refused 0") {
		t.Errorf("second adopt: %v", r)
	}
	// The recorded spec lets a stopped job run again.
	h.ok("stop", "k8s-team-a|job|task")
	h.ok("start", "k8s-team-a|job|task")
	if _, err := h.job("", "team-a", "task"); err != nil {
		t.Errorf("job not re-created from the adopted spec: %v", err)
	}
}

// plantedJob is a job whose pod template runs busybox echo hi, and whose
// gobrave.dev/spec annotation, written by someone who can edit jobs in the
// namespace, asks for another image, the node's / and uid 0.
func plantedJob(t *testing.T, uid string) *batchv1.Job {
	t.Helper()
	objs, err := runtime.Build(spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job", Command: []string{"echo", "hi"}}, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	j := objs.Job
	j.UID = types.UID(uid)
	planted := spec.ContainerSpec{Name: "task", Image: "evil.example/miner:1", WorkloadKind: "job", Command: []string{"echo", "hi"},
		Volumes: []spec.Volume{{Source: "/", Target: "/host"}}, User: "0", AllowUnsafeHostPath: false}
	raw, err := json.Marshal(planted)
	if err != nil {
		t.Fatal(err)
	}
	j.Annotations[runtime.AnnotationSpec] = string(raw)
	return j
}

func TestAdoptRefusesAPlantedAnnotation(t *testing.T) {
	tests := []struct {
		name  string
		plant func(j *batchv1.Job)
		want  string
	}{
		{
			name: "another image, hostPath / and uid 0 under a busybox echo hi template",
			plant: func(j *batchv1.Job) {
				var s spec.ContainerSpec
				_ = json.Unmarshal([]byte(j.Annotations[runtime.AnnotationSpec]), &s)
				s.AllowUnsafeHostPath = false
				raw, _ := json.Marshal(s)
				j.Annotations[runtime.AnnotationSpec] = string(raw)
			},
			want: `job.batch/task not adopted: its gobrave.dev/spec annotation is not a valid spec: volumes[0].source "/": refused, it is the node's whole filesystem`,
		},
		{
			name: "another image and uid 0, valid as a spec",
			plant: func(j *batchv1.Job) {
				raw, _ := json.Marshal(spec.ContainerSpec{Name: "task", Image: "evil.example/miner:1", WorkloadKind: "job", Command: []string{"echo", "hi"},
					Volumes: []spec.Volume{{Source: "/srv", Target: "/host"}}, User: "0"})
				j.Annotations[runtime.AnnotationSpec] = string(raw)
			},
			want: "job.batch/task not adopted: its gobrave.dev/spec annotation disagrees with the job's pod template on image, volumes, volumeMounts, securityContext (an annotation is text anyone who can edit the job may write; the pod template is what runs)",
		},
		{
			name: "the unsafe hostPath allowed by the annotation itself",
			plant: func(j *batchv1.Job) {
				raw, _ := json.Marshal(spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job", Command: []string{"echo", "hi"}, AllowUnsafeHostPath: true})
				j.Annotations[runtime.AnnotationSpec] = string(raw)
			},
			want: "job.batch/task not adopted: its gobrave.dev/spec annotation asks for allowUnsafeHostPath, which only your own --allow-unsafe-host-path flag may grant",
		},
		{
			name: "a template changed under a true annotation (privileged, host network)",
			plant: func(j *batchv1.Job) {
				honest, _ := runtime.Build(spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job", Command: []string{"echo", "hi"}}, "team-a")
				j.Annotations = honest.Job.Annotations
				j.Spec.Template.Spec.HostNetwork = true
				j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptrTo(true)}
			},
			want: "disagrees with the job's pod template on securityContext, hostNetwork, hostPID, hostIPC",
		},
		{
			name: "an unknown field",
			plant: func(j *batchv1.Job) {
				j.Annotations[runtime.AnnotationSpec] = `{"name":"task","image":"busybox","workloadKind":"job","privileged":true}`
			},
			want: `its gobrave.dev/spec annotation is not a valid spec: line 1: unknown field "privileged"`,
		},
		{
			name: "another name",
			plant: func(j *batchv1.Job) {
				j.Annotations[runtime.AnnotationSpec] = `{"name":"web","image":"busybox","workloadKind":"job"}`
			},
			want: `its gobrave.dev/spec annotation names "web"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			j := plantedJob(t, "uid-planted")
			tt.plant(j)
			if _, err := h.clusters[""].BatchV1().Jobs("team-a").Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			r := h.run("adopt", "-n", "team-a")
			if r.code != 1 || r.stdout != "" || !strings.Contains(r.msg, tt.want) || strings.Contains(r.msg, "\n") {
				t.Fatalf("adopt of a planted annotation: %v\nmsg %q\nwant it to contain %q", r, r.msg, tt.want)
			}
			if !strings.Contains(r.stderr, "adopted 0, already known 0, refused 1") {
				t.Errorf("summary: %q", r.stderr)
			}
			if got := h.ps("-a"); len(got) != 0 {
				t.Errorf("records after a refused adopt: %+v", got)
			}
		})
	}
}

// A record that knows another object of the name is kept without --force;
// --force replaces it with the checked spec.
func TestAdoptKeepsARecordOfAnotherUID(t *testing.T) {
	h := newHarness(t)
	h.ok("create", "task", "--kind", "job", "-n", "team-a", "--image", "busybox", "--", "echo", "mine")
	mine := h.workload("k8s-team-a|job|task")
	// The job is replaced behind gobrave's back by one with another UID.
	c := h.clusters[""]
	if err := c.BatchV1().Jobs("team-a").Delete(t.Context(), "task", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	objs, err := runtime.Build(spec.ContainerSpec{Name: "task", Image: "busybox:2", WorkloadKind: "job", Command: []string{"echo", "theirs"}}, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	objs.Job.UID = "uid-theirs"
	if _, err := c.BatchV1().Jobs("team-a").Create(t.Context(), objs.Job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := h.run("adopt", "-n", "team-a")
	want := "job.batch/task not adopted: k8s-team-a|job|task already records another object (uid " + mine.UID + ", this one is uid uid-theirs); pass --force to replace the record (see 'kubectl gobrave inspect k8s-team-a|job|task')"
	if r.code != 1 || r.msg != want {
		t.Fatalf("adopt over a record of another UID: %v\nmsg  %q\nwant %q", r, r.msg, want)
	}
	if got := h.workload("k8s-team-a|job|task"); got.UID != mine.UID || strings.Join(got.Spec.Command, " ") != "echo mine" || got.Epoch != mine.Epoch {
		t.Errorf("record after the refused adopt: %+v", got)
	}

	out := h.ok("adopt", "-n", "team-a", "--force")
	if out != "job.batch/task adopted (k8s-team-a|job|task, starting, image busybox:2)\n" {
		t.Errorf("adopt --force: %q", out)
	}
	if got := h.workload("k8s-team-a|job|task"); got.UID != "uid-theirs" || strings.Join(got.Spec.Command, " ") != "echo theirs" {
		t.Errorf("record after adopt --force: %+v", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestAdoptAllNamespaces: -A adopts from every namespace, -n from one.
func TestAdoptAllNamespaces(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	c := h.clusters[""]
	for i, ns := range []string{"team-a", "team-b"} {
		objs, err := runtime.Build(spec.ContainerSpec{Name: "web", Image: "nginx:1.27"}, ns)
		if err != nil {
			t.Fatal(err)
		}
		objs.Deployment.UID = types.UID(fmt.Sprintf("uid-%d", i))
		if _, err := c.AppsV1().Deployments(ns).Create(ctx, objs.Deployment, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if out := h.ok("adopt", "-n", "team-a"); !strings.Contains(out, "k8s-team-a|deployment|web") || strings.Contains(out, "team-b") {
		t.Errorf("adopt -n team-a: %q", out)
	}
	out := h.ok("adopt", "-A")
	if !strings.Contains(out, "k8s-team-b|deployment|web") || strings.Contains(out, "team-a") {
		t.Errorf("adopt -A after team-a: %q, want only team-b's", out)
	}
	if got := h.state("k8s-team-b|deployment|web"); got == "" {
		t.Error("team-b's deployment was not recorded")
	}
}
