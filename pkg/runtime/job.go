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
	"k8s.io/client-go/util/retry"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// jobKind is a task: a Job with one pod that is not retried. Stop deletes it
// in the foreground (its spec stays in the record); start of a job that is
// gone, finished or being deleted creates it again from the recorded spec.
// Pause suspends it (spec.suspend: the job controller removes its pods and
// keeps the job and its completions); start or resume of a suspended job
// unsuspends it; restart deletes it and creates it again, whatever its state.
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

// PlanStart: a job that runs is left alone; a suspended one is
// unsuspended; one that is gone, finished or being deleted (a stop still in
// progress) is replaced.
func (jobKind) PlanStart(id runtimeid.ID, obj metav1.Object) (StartPlan, error) {
	job, _ := obj.(*batchv1.Job)
	switch {
	case job == nil:
		return StartPlan{Replace: true, Message: "create the job again from the recorded spec"}, nil
	case job.DeletionTimestamp != nil:
		return StartPlan{UID: string(job.UID), Replace: true, Message: "create the job again from the recorded spec once the old one is gone"}, nil
	case jobFinished(job):
		return StartPlan{UID: string(job.UID), Replace: true, Message: "replace the finished job by a new run from the recorded spec"}, nil
	case job.Spec.Suspend != nil && *job.Spec.Suspend:
		return StartPlan{UID: string(job.UID), Unsuspend: true, Message: "unsuspend the job (its completions are kept)"}, nil
	}
	return StartPlan{UID: string(job.UID), Leave: true, Message: "the job is running: leave it alone"}, nil
}

// PlanRestart: a new run from the recorded spec, whatever the job's state;
// the job of the name, if any, is deleted first.
func (jobKind) PlanRestart(id runtimeid.ID, obj metav1.Object) (StartPlan, error) {
	job, _ := obj.(*batchv1.Job)
	if job == nil {
		return StartPlan{Replace: true, Message: "create the job again from the recorded spec"}, nil
	}
	return StartPlan{UID: string(job.UID), Replace: true, Message: "delete the job and run it again from the recorded spec"}, nil
}

func (jobKind) Start(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, plan StartPlan, s *spec.ContainerSpec) (StartResult, error) {
	if plan.Leave {
		return StartResult{UID: plan.UID}, nil
	}
	if plan.Unsuspend {
		return StartResult{UID: plan.UID}, setSuspend(ctx, c, id, types.UID(plan.UID), false)
	}
	if s == nil || s.Image == "" {
		return StartResult{}, fmt.Errorf("start %s: the job %w and its spec is unknown here, so it cannot run again (create it with 'kubectl gobrave create')", id, ErrGone)
	}
	// The recorded spec may predate today's checks (a record adopted from a
	// planted annotation before adopt checked it): it is checked like a new
	// spec before it runs with the user's credentials.
	if err := s.Validate(); err != nil {
		return StartResult{}, fmt.Errorf("start %s: the recorded spec is refused, nothing was changed (%w); delete the record and create the job again", id, err)
	}
	objs, err := Build(*s, id.Namespace)
	if err != nil {
		return StartResult{}, err
	}
	// The namespace's Pod Security level may have changed since the job
	// was made: ask before the old run is deleted.
	if err := CheckPods(ctx, c, id.Namespace, *s, objs, id.Kind); err != nil {
		return StartResult{}, fmt.Errorf("start %s: %w", id, err)
	}
	if plan.UID != "" {
		if err := deleteJobAndWait(ctx, c, id, types.UID(plan.UID)); err != nil {
			return StartResult{}, err
		}
	}
	created, err := c.BatchV1().Jobs(id.Namespace).Create(ctx, objs.Job, metav1.CreateOptions{})
	if err != nil {
		return StartResult{}, fmt.Errorf("start %s: %w", id, createError("job", id.Name, id.Namespace, err))
	}
	return StartResult{UID: string(created.UID), Recreated: true}, nil
}

// PlanUpdate: a job's object is never changed (its template is
// immutable): the recorded spec changes, and the next run (start,
// restart) is made from it. The job that runs, if any, runs on.
func (jobKind) PlanUpdate(id runtimeid.ID, obj metav1.Object, recorded spec.ContainerSpec) (UpdatePlan, error) {
	p := UpdatePlan{Message: "record the new spec: the next run (start, restart) uses it; a run under way keeps its own"}
	if job, _ := obj.(*batchv1.Job); job != nil {
		p.UID = string(job.UID)
	}
	return p, nil
}

// Update of a job sends nothing (see PlanUpdate).
func (jobKind) Update(context.Context, kubernetes.Interface, runtimeid.ID, UpdatePlan, Objects) error {
	return nil
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
		return fmt.Errorf("start %s: remove the previous job before running it again: %w", id, err)
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

func (jobKind) Stop(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (bool, error) {
	err := c.BatchV1().Jobs(id.Namespace).Delete(ctx, id.Name, deleteJobOptions(uid))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stop %s: %w", id, err)
	}
	return true, nil
}

// errNothingToPause says why a job cannot be suspended.
var errNothingToPause = errors.New("nothing to pause")

// Pause suspends the job: the job controller deletes its pods and keeps the
// job, its completions and its spec. A job that has finished or is being
// deleted is left alone, with an error saying so.
func (jobKind) Pause(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (bool, error) {
	err := setSuspend(ctx, c, id, uid, true)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// setSuspend sets the job's spec.suspend, retrying on conflict. uid, when
// set, is the job it must be.
func setSuspend(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID, suspend bool) error {
	verb := "unsuspend"
	if suspend {
		verb = "pause"
	}
	jobs := c.BatchV1().Jobs(id.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := jobs.Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch {
		case uid != "" && j.UID != uid:
			return fmt.Errorf("the job %w: another job of the name has uid %s", ErrGone, j.UID)
		case j.DeletionTimestamp != nil && suspend:
			return fmt.Errorf("%w: the job is being deleted", errNothingToPause)
		case j.DeletionTimestamp != nil:
			return fmt.Errorf("the job is being deleted: start it again once it is gone, to run it anew")
		case suspend && jobFinished(j):
			return fmt.Errorf("%w: the job has finished (start runs it again)", errNothingToPause)
		case j.Spec.Suspend != nil && *j.Spec.Suspend == suspend:
			return nil
		}
		j.Spec.Suspend = ptr(suspend)
		_, err = jobs.Update(ctx, j, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, id, err)
	}
	return nil
}

// PauseExpect: a job's pause is its suspension.
func (jobKind) PauseExpect() store.EventType { return store.ContainerPaused }

func (jobKind) PauseAction() string {
	return "suspend the job (its pods are removed, the job and its completions kept)"
}

// StopExpect: a job's stop is its deletion.
func (jobKind) StopExpect() store.EventType { return store.ContainerDeleted }

func (jobKind) StopAction() string { return "delete the job (foreground)" }

// deleteJobOptions deletes in the foreground (the pods first), and only the
// job of uid when it is set (a replaced one fails with a Conflict).
func deleteJobOptions(uid types.UID) metav1.DeleteOptions {
	opts := metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return opts
}

func (k jobKind) Delete(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (bool, error) {
	err := c.BatchV1().Jobs(id.Namespace).Delete(ctx, id.Name, deleteJobOptions(uid))
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
// is finished, win over the rest. Then a suspended job (spec.suspend, and
// the Suspended condition the job controller sets when it has removed the
// job from the running) is paused, with the message "suspended"; a job
// asked to suspend that the controller has not suspended yet, or one
// being deleted, reports nothing (its pods are going, it does not run);
// one asked to resume (spec.suspend false) whose Suspended condition is
// still true is read by its counters. Then the counters are read:
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
	suspend := j.Spec.Suspend != nil && *j.Spec.Suspend
	if suspend || j.Spec.Suspend == nil {
		suspended := false
		for _, c := range j.Status.Conditions {
			suspended = suspended || (c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue)
		}
		switch {
		case suspended && j.DeletionTimestamp == nil:
			return Observation{Type: store.ContainerPaused, Message: store.SuspendedMessage, UID: uid,
				Result: store.Result{Reason: ReasonSuspended, StartedAt: started}}, true
		case suspended || suspend:
			return Observation{}, false
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

// Slim keeps spec.backoffLimit and spec.suspend, the status counters, the
// start and completion times and the conditions' type, status, reason,
// message and last transition time.
func (jobKind) Slim(obj any) (any, bool) {
	o, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, false
	}
	j := &batchv1.Job{
		ObjectMeta: slimMeta(&o.ObjectMeta),
		Spec:       batchv1.JobSpec{BackoffLimit: o.Spec.BackoffLimit, Suspend: o.Spec.Suspend},
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
