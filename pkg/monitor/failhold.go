package monitor

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// A Job's Failed condition comes on the job informer's watch; the failed
// pod that caused it comes on the pod informer's, a separate stream that can
// run seconds behind: a watch the API server (or a proxy) cut is opened
// again, after a backoff when the next request fails. Recorded as soon as
// it is seen, such a failure would lose its exit code for good (the record
// is terminal, nothing records it again): "failed: BackoffLimitExceeded"
// where the user asked what the container exited with. So the writer holds
// it back, without holding anything else, until the pod cache shows a
// failed pod of the job, for at most failHoldFor.
var (
	failHoldFor  = 15 * time.Second
	failHoldPoll = 50 * time.Millisecond // how often the writer looks at its holds
)

// failHold is one job failure held back, with the observations of the same
// IDs queued after it (kept in order behind it).
type failHold struct {
	it           item
	since, until time.Time
	after        []item
}

// podFailureReasons are the Failed conditions' reasons that mean a pod of
// the job failed; the others (DeadlineExceeded: the controller deleted the
// running pods) leave no failed container to wait for.
var podFailureReasons = []string{
	batchv1.JobReasonBackoffLimitExceeded,
	batchv1.JobReasonPodFailurePolicy,
	batchv1.JobReasonFailedIndexes,
	batchv1.JobReasonMaxFailedIndexesExceeded,
}

// holdFailures returns the items to record now, in order: first the holds
// that end (their failed pod is cached, their time is up, or final: the
// writer stops), each followed by the later items of its IDs, then the
// items given, except the job failures whose failed pod is not cached yet
// (they become holds) and the items of IDs held (queued behind their hold).
// Called by the writer only.
func (m *Monitor) holdFailures(items []item, now time.Time, final bool) []item {
	if len(m.failHolds) == 0 && !slices.ContainsFunc(items, isJobFailure) {
		return items
	}
	out := make([]item, 0, len(items))
	kept := m.failHolds[:0]
	for _, h := range m.failHolds {
		if came := !m.podFailureMissing(&h.it); came || final || !now.Before(h.until) {
			if v := klog.V(traceLevel); v.Enabled() {
				v.InfoS("monitor: job failure held for its pod", "id", h.it.ids[0], "podCame", came,
					"heldMs", ms(now.Sub(h.since)))
			}
			out = append(out, h.it)
			out = append(out, h.after...)
			continue
		}
		kept = append(kept, h)
	}
	clear(m.failHolds[len(kept):])
	m.failHolds = kept
	for _, it := range items {
		if h := m.holdOf(it.ids); h != nil {
			h.after = append(h.after, it)
			continue
		}
		if !final && isJobFailure(it) && m.podFailureMissing(&it) {
			m.failHolds = append(m.failHolds, &failHold{it: it, since: now, until: now.Add(failHoldFor)})
			continue
		}
		out = append(out, it)
	}
	return out
}

// holdOf is the hold of any of ids, or nil.
func (m *Monitor) holdOf(ids []string) *failHold {
	for _, h := range m.failHolds {
		for _, id := range ids {
			if slices.Contains(h.it.ids, id) {
				return h
			}
		}
	}
	return nil
}

// isJobFailure reports whether it is a Job's failure caused by failed pods,
// without an exit code yet.
func isJobFailure(it item) bool {
	if it.obs.Type != store.ContainerFailed || it.obs.ExitCode != nil || it.obs.UID == "" || len(it.ids) == 0 ||
		!slices.Contains(podFailureReasons, it.obs.Reason) {
		return false
	}
	id, err := runtimeid.Parse(it.ids[0])
	return err == nil && id.Kind == runtimeid.KindJob
}

// podFailureMissing reports whether the pod cache can say (pods are
// readable there) and holds no failed pod of the job failure it.
func (m *Monitor) podFailureMissing(it *item) bool {
	id, err := runtimeid.Parse(it.ids[0])
	if err != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pods, ok := m.podsLocked(&subscription{id: id.String(), uid: it.obs.UID})
	if !ok {
		return false
	}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodFailed {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return false
			}
		}
	}
	return true
}
