package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// jobKind is a task: a Job with one pod that is not retried. Stop deletes it
// in the foreground (its spec stays in the record); start of a job that is
// gone, finished or being deleted creates it again from the recorded spec.
type jobKind struct{}

// ErrNotCreated says a start gave up before it created the new job: whatever
// interrupted it, nothing was started.
var ErrNotCreated = errors.New("the new job was not created")

// JobGoneTimeout bounds how long a start waits for the previous job of the
// same name to go away (a finalizer can hold it for ever).
var JobGoneTimeout = time.Minute

func (jobKind) Resource() string { return "job.batch" }

func (jobKind) Name() string { return runtimeid.KindJob }

func (jobKind) Build(s spec.ContainerSpec, meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec) (Objects, error) {
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return Objects{Job: &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr(int32(0)),
			Template:     tmpl,
		},
	}}, nil
}

func (jobKind) Create(ctx context.Context, c kubernetes.Interface, namespace string, objs Objects) (Created, error) {
	job, err := c.BatchV1().Jobs(namespace).Create(ctx, objs.Job, metav1.CreateOptions{})
	if err != nil {
		return Created{}, createError("job", objs.Job.Name, namespace, err)
	}
	return Created{UID: string(job.UID)}, nil
}

// PlanStart: a job that runs is left alone; one that is gone, finished or
// being deleted (a stop still in progress) is replaced.
func (jobKind) PlanStart(id runtimeid.ID, obj metav1.Object) (StartPlan, error) {
	job, _ := obj.(*batchv1.Job)
	switch {
	case job == nil:
		return StartPlan{Replace: true, Message: "create the job again from the recorded spec"}, nil
	case job.DeletionTimestamp != nil:
		return StartPlan{UID: string(job.UID), Replace: true, Message: "create the job again from the recorded spec once the old one is gone"}, nil
	case jobFinished(job):
		return StartPlan{UID: string(job.UID), Replace: true, Message: "replace the finished job by a new run from the recorded spec"}, nil
	}
	return StartPlan{UID: string(job.UID), Leave: true, Message: "the job is running: leave it alone"}, nil
}

func (jobKind) Start(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, plan StartPlan, s *spec.ContainerSpec) (StartResult, error) {
	if plan.Leave {
		return StartResult{UID: plan.UID}, nil
	}
	if s == nil || s.Image == "" {
		return StartResult{}, fmt.Errorf("start %s: the job %w and its spec is unknown here, so it cannot run again (create it with 'kubectl gobrave create')", id, ErrGone)
	}
	if plan.UID != "" {
		if err := deleteJobAndWait(ctx, c, id, types.UID(plan.UID)); err != nil {
			return StartResult{}, err
		}
	}
	objs, err := Build(*s, id.Namespace)
	if err != nil {
		return StartResult{}, err
	}
	created, err := c.BatchV1().Jobs(id.Namespace).Create(ctx, objs.Job, metav1.CreateOptions{})
	if err != nil {
		return StartResult{}, fmt.Errorf("start %s: %w", id, createError("job", id.Name, id.Namespace, err))
	}
	return StartResult{UID: string(created.UID), Recreated: true}, nil
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// deleteJobAndWait deletes the job with uid (a finished one, or one already
// being deleted) so it can be created again under its name, and waits until
// it is gone, at most JobGoneTimeout.
func deleteJobAndWait(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) error {
	jobs := c.BatchV1().Jobs(id.Namespace)
	err := jobs.Delete(ctx, id.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: ptr(metav1.DeletePropagationBackground),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("start %s: remove the finished job before running it again: %w", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, JobGoneTimeout)
	defer cancel()
	var last *batchv1.Job
	err = wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, id.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && j.UID != uid):
			return true, nil
		case err != nil:
			// Not yet known: the poll's own deadline decides.
			return false, nil
		}
		last = j
		return false, nil
	})
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		fin := "none"
		if last != nil && len(last.Finalizers) > 0 {
			fin = strings.Join(last.Finalizers, ", ")
		}
		return fmt.Errorf("start %s: %w: the previous job is still being deleted after %s (finalizers: %s): wait, or remove what holds it with 'kubectl get job -n %s %s -o yaml', then start again",
			id, ErrNotCreated, JobGoneTimeout, fin, id.Namespace, id.Name)
	}
	return fmt.Errorf("start %s: %w: wait for the previous job to be removed: %w", id, ErrNotCreated, err)
}

func (jobKind) Stop(ctx context.Context, c kubernetes.Interface, id runtimeid.ID) (bool, error) {
	err := c.BatchV1().Jobs(id.Namespace).Delete(ctx, id.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr(metav1.DeletePropagationForeground),
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stop %s: %w", id, err)
	}
	return true, nil
}

// StopExpect: a job's stop is its deletion.
func (jobKind) StopExpect() store.EventType { return store.ContainerDeleted }

func (jobKind) StopAction() string { return "delete the job (foreground)" }

func (k jobKind) Delete(ctx context.Context, c kubernetes.Interface, id runtimeid.ID) (bool, error) {
	err := c.BatchV1().Jobs(id.Namespace).Delete(ctx, id.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr(metav1.DeletePropagationForeground),
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", id, err)
	}
	return true, nil
}

func (jobKind) Get(ctx context.Context, c kubernetes.Interface, namespace, name string) (metav1.Object, error) {
	return c.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (jobKind) Observe(obj any) (Observation, bool) {
	j, _ := obj.(*batchv1.Job)
	return JobEvent(j)
}

func (jobKind) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Batch().V1().Jobs().Informer()
}

// JobEvent maps the status of a Job to an observation; false means there is
// nothing to report yet.
//
// The Complete and Failed conditions, set by the job controller when the Job
// is finished, win over the counters. Without them the counters are read:
// a Job with an active pod is running (a failed pod being retried is not a
// failure yet), then Succeeded > 0 means exited 0, and Failed > 0 means failed
// unless spec.backoffLimit is known and not yet exceeded (the controller will
// create another pod). A Job being deleted reports nothing but its end.
func JobEvent(j *batchv1.Job) (Observation, bool) {
	if j == nil {
		return Observation{}, false
	}
	uid := string(j.UID)
	started := timeOf(j.Status.StartTime)
	completed := func(finished *metav1.Time) (Observation, bool) {
		if j.Status.CompletionTime != nil {
			finished = j.Status.CompletionTime
		}
		return Observation{Type: store.ContainerExited, Message: "0", UID: uid,
			Result: store.Result{Reason: ReasonCompleted, ExitCode: exitCode(0), StartedAt: started, FinishedAt: timeOf(finished)}}, true
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return completed(&c.LastTransitionTime)
		case batchv1.JobFailed:
			msg := conditionMessage(c.Reason, c.Message)
			if msg == "" {
				msg = "failed count " + strconv.Itoa(int(j.Status.Failed))
			}
			reason := c.Reason
			if reason == "" {
				reason = ReasonError
			}
			return Observation{Type: store.ContainerFailed, Message: msg, UID: uid,
				Result: store.Result{Reason: reason, StartedAt: started, FinishedAt: timeOf(&c.LastTransitionTime)}}, true
		}
	}
	st := j.Status
	// status.active counts Pending pods too: a pod that cannot be scheduled
	// is active but has not started. status.ready (set by every job
	// controller since Kubernetes 1.24) counts pods whose containers run;
	// only without it is active the best there is.
	running := st.Active > 0
	if st.Ready != nil {
		running = *st.Ready > 0
	}
	switch {
	case running:
		if j.DeletionTimestamp != nil {
			return Observation{}, false
		}
		return Observation{Type: store.ContainerStarted, UID: uid, Result: store.Result{StartedAt: started}}, true
	case st.Succeeded > 0:
		return completed(nil)
	case st.Failed > 0 && (j.Spec.BackoffLimit == nil || st.Failed > *j.Spec.BackoffLimit):
		return Observation{Type: store.ContainerFailed, Message: fmt.Sprintf("%d failed pods", st.Failed), UID: uid,
			Result: store.Result{Reason: batchv1.JobReasonBackoffLimitExceeded, StartedAt: started}}, true
	}
	return Observation{}, false
}

// Slim keeps spec.backoffLimit, the status counters, the start and
// completion times and the conditions' type, status, reason, message and
// last transition time.
func (jobKind) Slim(obj any) (any, bool) {
	o, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, false
	}
	j := &batchv1.Job{
		ObjectMeta: slimMeta(&o.ObjectMeta),
		Spec:       batchv1.JobSpec{BackoffLimit: o.Spec.BackoffLimit},
		Status: batchv1.JobStatus{
			StartTime:      o.Status.StartTime,
			CompletionTime: o.Status.CompletionTime,
			Active:         o.Status.Active,
			Succeeded:      o.Status.Succeeded,
			Failed:         o.Status.Failed,
			Ready:          o.Status.Ready,
		},
	}
	if len(o.Status.Conditions) > 0 {
		j.Status.Conditions = make([]batchv1.JobCondition, len(o.Status.Conditions))
		for i, c := range o.Status.Conditions {
			j.Status.Conditions[i] = batchv1.JobCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		}
	}
	return j, true
}
