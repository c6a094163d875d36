package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

var now = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

func jobCond(t batchv1.JobConditionType, s corev1.ConditionStatus, reason, msg string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: now}
}

func deployCond(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: now}
}

func TestJobEvent(t *testing.T) {
	started := func(uid string) *Observation { return &Observation{Type: store.ContainerStarted, UID: uid} }
	exited := &Observation{Type: store.ContainerExited, Message: "0", UID: "u1", Result: store.Result{Reason: "Completed", ExitCode: ptr(int32(0))}}
	paused := &Observation{Type: store.ContainerPaused, Message: store.SuspendedMessage, UID: "u1", Result: store.Result{Reason: ReasonSuspended}}
	failed := func(msg, reason string) *Observation {
		return &Observation{Type: store.ContainerFailed, Message: msg, UID: "u1", Result: store.Result{Reason: reason}}
	}
	tests := []struct {
		name   string
		status batchv1.JobStatus
		spec   batchv1.JobSpec
		gone   bool // deletionTimestamp set
		want   *Observation
	}{
		{name: "new job, no status", want: nil},
		{name: "active pod, no ready count (old controller)", status: batchv1.JobStatus{Active: 1}, want: started("u1")},
		{name: "ready pod", status: batchv1.JobStatus{Active: 1, Ready: ptr(int32(1)), StartTime: &now}, want: started("u1")},
		{name: "pending pod is active but not started", status: batchv1.JobStatus{Active: 1, Ready: ptr(int32(0)), StartTime: &now}, want: nil},
		{name: "start time only", status: batchv1.JobStatus{StartTime: &now}, want: nil},
		{name: "complete condition", status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "CompletionsReached", ""),
			jobCond(batchv1.JobComplete, corev1.ConditionTrue, "CompletionsReached", "Reached expected number of succeeded pods"),
		}}, want: exited},
		{name: "complete after failed retries", status: batchv1.JobStatus{Succeeded: 1, Failed: 2, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobComplete, corev1.ConditionTrue, "", ""),
		}}, want: exited},
		{name: "complete condition wins over counters", status: batchv1.JobStatus{Active: 1, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobComplete, corev1.ConditionTrue, "", ""),
		}}, want: exited},
		{name: "failed condition with reason and message", status: batchv1.JobStatus{Failed: 7, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobFailureTarget, corev1.ConditionTrue, "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
			jobCond(batchv1.JobFailed, corev1.ConditionTrue, "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
		}}, want: failed("BackoffLimitExceeded: Job has reached the specified backoff limit", "BackoffLimitExceeded")},
		{name: "failed condition with message only", status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobFailed, corev1.ConditionTrue, "", "Job was active longer than specified deadline"),
		}}, want: failed("Job was active longer than specified deadline", "Error")},
		{name: "failed condition with reason only", status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobFailed, corev1.ConditionTrue, "DeadlineExceeded", ""),
		}}, want: failed("DeadlineExceeded", "DeadlineExceeded")},
		{name: "failed condition without text uses the failed count", status: batchv1.JobStatus{Failed: 3, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobFailed, corev1.ConditionTrue, "", ""),
		}}, want: failed("failed count 3", "Error")},
		{name: "failed condition wins even with a pod still active", status: batchv1.JobStatus{Active: 1, Failed: 1, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobFailed, corev1.ConditionTrue, "DeadlineExceeded", "too slow"),
		}}, want: failed("DeadlineExceeded: too slow", "DeadlineExceeded")},
		{name: "condition not true is ignored", status: batchv1.JobStatus{Active: 1, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobComplete, corev1.ConditionFalse, "", ""),
			jobCond(batchv1.JobFailed, corev1.ConditionUnknown, "", ""),
		}}, want: started("u1")},
		// Suspension (spec.suspend; the Suspended condition is the job
		// controller's acknowledgement).
		{name: "suspended, spec unknown", status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
		}}, want: paused},
		{name: "suspended", spec: batchv1.JobSpec{Suspend: ptr(true)}, status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
		}}, want: paused},
		{name: "suspend asked, not done yet, pod still ready", spec: batchv1.JobSpec{Suspend: ptr(true)},
			status: batchv1.JobStatus{Active: 1, Ready: ptr(int32(1)), StartTime: &now}, want: nil},
		{name: "suspended and being deleted", gone: true, spec: batchv1.JobSpec{Suspend: ptr(true)}, status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
		}}, want: nil},
		{name: "resume asked, controller not there yet", spec: batchv1.JobSpec{Suspend: ptr(false)}, status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
		}}, want: nil},
		{name: "resumed, pod ready", spec: batchv1.JobSpec{Suspend: ptr(false)}, status: batchv1.JobStatus{Active: 1, Ready: ptr(int32(1)), Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed"),
		}}, want: started("u1")},
		{name: "suspended after completion", spec: batchv1.JobSpec{Suspend: ptr(true)}, status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
			jobCond(batchv1.JobComplete, corev1.ConditionTrue, "", ""),
		}}, want: exited},
		{name: "no conditions, succeeded", status: batchv1.JobStatus{Succeeded: 1, StartTime: &now}, want: exited},
		{name: "no conditions, failed, backoff limit unknown", status: batchv1.JobStatus{Failed: 2, StartTime: &now}, want: failed("2 failed pods", "BackoffLimitExceeded")},
		{name: "no conditions, failed beyond the backoff limit", spec: batchv1.JobSpec{BackoffLimit: ptr(int32(6))},
			status: batchv1.JobStatus{Failed: 7}, want: failed("7 failed pods", "BackoffLimitExceeded")},
		{name: "no conditions, backoff limit 0", spec: batchv1.JobSpec{BackoffLimit: ptr(int32(0))},
			status: batchv1.JobStatus{Failed: 1}, want: failed("1 failed pods", "BackoffLimitExceeded")},
		{name: "no conditions, failed pod being retried", status: batchv1.JobStatus{Active: 1, Failed: 1}, want: started("u1")},
		{name: "no conditions, failed pod waiting for its retry", spec: batchv1.JobSpec{BackoffLimit: ptr(int32(6))},
			status: batchv1.JobStatus{Failed: 1, StartTime: &now}, want: nil},
		{name: "no conditions, success wins over failures", status: batchv1.JobStatus{Succeeded: 1, Failed: 3}, want: exited},
		{name: "being deleted with an active pod", gone: true, status: batchv1.JobStatus{Active: 1}, want: nil},
		{name: "being deleted after completion", gone: true, status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			jobCond(batchv1.JobComplete, corev1.ConditionTrue, "", ""),
		}}, want: exited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u1", Labels: map[string]string{LabelWorkload: "task"},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
				Spec:   tt.spec,
				Status: tt.status,
			}
			if tt.gone {
				j.DeletionTimestamp = &now
			}
			checkObservation(t, tt.want)(JobEvent(j))
			// The informers' transform keeps everything the mapping reads.
			s, err := Slim(j)
			if err != nil {
				t.Fatal(err)
			}
			checkObservation(t, tt.want)(JobEvent(s.(*batchv1.Job)))
		})
	}
	t.Run("nil", func(t *testing.T) { checkObservation(t, nil)(JobEvent(nil)) })
}

func TestDeploymentEvent(t *testing.T) {
	started := &Observation{Type: store.ContainerStarted, UID: "u1"}
	exited := &Observation{Type: store.ContainerExited, Message: "0", UID: "u1", Result: store.Result{Reason: "Stopped"}}
	failed := func(msg string) *Observation {
		reason, _, _ := strings.Cut(msg, ":")
		return &Observation{Type: store.ContainerFailed, Message: msg, UID: "u1", Result: store.Result{Reason: reason}}
	}
	quota := deployCond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", `pods "web-1" is forbidden: exceeded quota`)
	deadline := deployCond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", `ReplicaSet "web-1" has timed out progressing.`)
	tests := []struct {
		name       string
		generation int64
		replicas   *int32
		status     appsv1.DeploymentStatus
		gone       bool
		want       *Observation
	}{
		{name: "new deployment, no status", want: nil},
		{name: "one ready replica", replicas: ptr(int32(1)), status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}, want: started},
		{name: "replicas nil means 1", status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}, want: started},
		{name: "replicas nil, nothing yet", status: appsv1.DeploymentStatus{Replicas: 0}, want: nil},
		{name: "pods not ready yet", replicas: ptr(int32(2)), status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 0}, want: nil},
		{name: "observed generation current", generation: 3, status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, ReadyReplicas: 1}, want: started},
		{name: "stale status is ignored", generation: 4, replicas: ptr(int32(0)),
			status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, ReadyReplicas: 1}, want: nil},
		{name: "stale status is ignored even when it looks scaled to 0", generation: 5, replicas: ptr(int32(1)),
			status: appsv1.DeploymentStatus{ObservedGeneration: 4}, want: nil},
		{name: "scaled to 0, no replica left", replicas: ptr(int32(0)), status: appsv1.DeploymentStatus{}, want: exited},
		{name: "scaled to 0, replicas still terminating", replicas: ptr(int32(0)),
			status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}, want: nil},
		{name: "scaled to 0 wins over an old deadline condition", replicas: ptr(int32(0)),
			status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{deadline}}, want: exited},
		{name: "replica failure", status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{quota}},
			want: failed(`FailedCreate: pods "web-1" is forbidden: exceeded quota`)},
		{name: "replica failure wins over a ready replica", status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{quota}}, want: failed(`FailedCreate: pods "web-1" is forbidden: exceeded quota`)},
		{name: "replica failure false is not a failure", status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{deployCond(appsv1.DeploymentReplicaFailure, corev1.ConditionFalse, "", "")}}, want: started},
		{name: "progress deadline exceeded", status: appsv1.DeploymentStatus{Replicas: 1,
			Conditions: []appsv1.DeploymentCondition{deadline}}, want: failed(`ProgressDeadlineExceeded: ReplicaSet "web-1" has timed out progressing.`)},
		{name: "progress deadline without message", status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
			deployCond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", "")}}, want: failed("ProgressDeadlineExceeded")},
		{name: "progressing false for another reason", status: appsv1.DeploymentStatus{Replicas: 1, Conditions: []appsv1.DeploymentCondition{
			deployCond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "SomethingElse", "")}}, want: nil},
		{name: "progressing true", status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			deployCond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", ""),
			deployCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", "")}}, want: started},
		{name: "a new template rolling out: the old pod is ready", status: appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			deployCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", "")}}, want: nil},
		{name: "a rollback re-using the old ReplicaSet, not scaled up yet", status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 0, ReadyReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			deployCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", "")}}, want: nil},
		{name: "old pods left", status: appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2, Conditions: []appsv1.DeploymentCondition{
			deployCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", "")}}, want: nil},
		{name: "the new template rolled out", status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			deployCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", "")}}, want: started},
		{name: "being deleted with a ready replica", gone: true, status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Generation: tt.generation,
					Labels:        map[string]string{LabelWorkload: "web", "app": "web"},
					Annotations:   map[string]string{"deployment.kubernetes.io/revision": "1"},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
				Spec:   appsv1.DeploymentSpec{Replicas: tt.replicas},
				Status: tt.status,
			}
			if tt.gone {
				d.DeletionTimestamp = &now
			}
			checkObservation(t, tt.want)(DeploymentEvent(d))
			s, err := Slim(d)
			if err != nil {
				t.Fatal(err)
			}
			checkObservation(t, tt.want)(DeploymentEvent(s.(*appsv1.Deployment)))
		})
	}
	t.Run("nil", func(t *testing.T) { checkObservation(t, nil)(DeploymentEvent(nil)) })
}

func TestDeleted(t *testing.T) {
	want := Observation{Type: store.ContainerDeleted, UID: "u9"}
	if diff := cmp.Diff(want, Deleted("u9")); diff != "" {
		t.Errorf("Deleted (-want +got):\n%s", diff)
	}
}

func TestSlim(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Generation: 2, ResourceVersion: "42",
			Labels:        map[string]string{LabelWorkload: "web", "app": "web", "team": "a"},
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{deployCond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "ok")}},
	}
	got, err := Slim(d)
	if err != nil {
		t.Fatal(err)
	}
	want := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Generation: 2, ResourceVersion: "42",
			Labels: map[string]string{LabelWorkload: "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1))},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "ok"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slim deployment (-want +got):\n%s", diff)
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u2", DeletionTimestamp: &now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: batchv1.JobSpec{BackoffLimit: ptr(int32(2)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
		Status: batchv1.JobStatus{Active: 1, Failed: 1, StartTime: &now, Ready: ptr(int32(1))},
	}
	gotJob, err := Slim(j)
	if err != nil {
		t.Fatal(err)
	}
	wantJob := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "ns", UID: "u2", DeletionTimestamp: &now},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr(int32(2))},
		Status:     batchv1.JobStatus{Active: 1, Failed: 1, StartTime: &now, Ready: ptr(int32(1))},
	}
	if diff := cmp.Diff(wantJob, gotJob); diff != "" {
		t.Errorf("slim job (-want +got):\n%s", diff)
	}
	if other, _ := Slim("tombstone"); other != "tombstone" {
		t.Errorf("slim changed a value of another type: %v", other)
	}
}

// checkObservation compares the result of a mapping with want (nil: nothing).
func checkObservation(t *testing.T, want *Observation) func(Observation, bool) {
	t.Helper()
	return func(got Observation, ok bool) {
		t.Helper()
		if want == nil {
			if ok {
				t.Errorf("got %+v, want nothing", got)
			}
			return
		}
		if !ok {
			t.Fatalf("got nothing, want %+v", *want)
		}
		if want.StartedAt == nil && want.FinishedAt == nil {
			// The times are checked by TestObservationTimes.
			got.StartedAt, got.FinishedAt = nil, nil
		}
		// Observation.Equal would hide the fields cmp shows.
		type fields Observation
		if diff := cmp.Diff(fields(*want), fields(got)); diff != "" {
			t.Errorf("observation (-want +got):\n%s", diff)
		}
	}
}

// TestObservationTimes: a job's run starts at its start time and finishes at
// its completion time (else when its condition became true); a deployment's
// failure finishes when its condition became true.
func TestObservationTimes(t *testing.T) {
	later := metav1.NewTime(now.Add(time.Minute))
	at := func(m metav1.Time) *time.Time { u := m.UTC(); return &u }
	tests := []struct {
		name string
		obj  any
		want store.Result
	}{
		{"running job", &batchv1.Job{Status: batchv1.JobStatus{Active: 1, Ready: ptr(int32(1)), StartTime: &now}},
			store.Result{StartedAt: at(now)}},
		{"completed job", &batchv1.Job{Status: batchv1.JobStatus{Succeeded: 1, StartTime: &now, CompletionTime: &later,
			Conditions: []batchv1.JobCondition{jobCond(batchv1.JobComplete, corev1.ConditionTrue, "", "")}}},
			store.Result{Reason: "Completed", ExitCode: ptr(int32(0)), StartedAt: at(now), FinishedAt: at(later)}},
		{"failed job", &batchv1.Job{Status: batchv1.JobStatus{Failed: 1, StartTime: &now,
			Conditions: []batchv1.JobCondition{jobCond(batchv1.JobFailed, corev1.ConditionTrue, "BackoffLimitExceeded", "")}}},
			store.Result{Reason: "BackoffLimitExceeded", StartedAt: at(now), FinishedAt: at(now)}},
		{"deployment past its deadline", &appsv1.Deployment{Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", LastTransitionTime: later}}}},
			store.Result{Reason: "ProgressDeadlineExceeded", FinishedAt: at(later)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, obj := range []any{tt.obj, must(Slim(tt.obj))} {
				got, ok := Observe(obj)
				if !ok {
					t.Fatal("no observation")
				}
				if diff := cmp.Diff(tt.want, got.Result); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}
