package monitor

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// failureTimeout bounds the one pod list made when a job fails.
const failureTimeout = 5 * time.Second

// enrichFailures adds the container's exit code to each job failure: as a
// number (the result's exitCode) and in the message ("exit code N (Reason):
// …"), since the Job's condition says only that the backoff limit was
// reached, while users ask "what did my container exit with". It reads the
// pod cache (pods.go) and, when the cache has no terminated container of
// the job, makes one pod list per failed job (never per ID in the steady
// state), in the writer, not in the informer handlers. Transient errors are
// retried (as for the confirming GET); a lookup that still fails keeps the
// condition's message.
func (m *Monitor) enrichFailures(ctx context.Context, items []item) {
	for i := range items {
		it := &items[i]
		if it.obs.Type != store.ContainerFailed || len(it.ids) == 0 {
			continue
		}
		id, err := runtimeid.Parse(it.ids[0])
		if err != nil || id.Kind != runtimeid.KindJob {
			continue
		}
		t := m.cachedTermination(id, it.obs.UID)
		if t == nil {
			t = m.listedTermination(ctx, id, it.obs.UID)
		}
		if t == nil {
			continue
		}
		code := t.ExitCode
		it.obs.ExitCode = &code
		it.obs.Message = exitDetail(t) + ": " + it.obs.Message
	}
}

// cachedTermination is the newest failed termination among the cached pods
// of the job uid, or nil.
func (m *Monitor) cachedTermination(id runtimeid.ID, uid string) *corev1.ContainerStateTerminated {
	if uid == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pods, ok := m.podsLocked(&subscription{id: id, uid: uid})
	if !ok {
		return nil
	}
	list := make([]corev1.Pod, len(pods))
	for i, p := range pods {
		list[i] = *p
	}
	return lastFailure(list)
}

// listedTermination lists the job's pods for the newest failed termination.
func (m *Monitor) listedTermination(ctx context.Context, id runtimeid.ID, uid string) *corev1.ContainerStateTerminated {
	ctx, cancel := context.WithTimeout(ctx, failureTimeout)
	defer cancel()
	selector := WorkloadLabel + "=" + id.Name
	if uid != "" {
		selector = "batch.kubernetes.io/controller-uid=" + uid
	}
	var pods *corev1.PodList
	err := retry.OnError(m.getBackoff, func(err error) bool { return ctx.Err() == nil && transient(err) }, func() error {
		var err error
		pods, err = m.client.CoreV1().Pods(id.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err
	})
	if err != nil {
		return nil
	}
	return lastFailure(pods.Items)
}

// exitDetailOf is "exit code N (Reason) message" of the newest terminated
// container with a non-zero exit code, or "".
func exitDetailOf(pods []corev1.Pod) string {
	if t := lastFailure(pods); t != nil {
		return exitDetail(t)
	}
	return ""
}

// lastFailure picks the newest terminated container with a non-zero exit code.
func lastFailure(pods []corev1.Pod) *corev1.ContainerStateTerminated {
	var (
		best *corev1.ContainerStateTerminated
		at   time.Time
	)
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 {
				continue
			}
			if best == nil || t.FinishedAt.After(at) {
				best, at = t, t.FinishedAt.Time
			}
		}
	}
	return best
}

// exitDetail is "exit code N (Reason) message" of t.
func exitDetail(t *corev1.ContainerStateTerminated) string {
	parts := []string{fmt.Sprintf("exit code %d", t.ExitCode)}
	if t.Reason != "" {
		parts = append(parts, "("+t.Reason+")")
	}
	if msg := strings.TrimSpace(t.Message); msg != "" {
		parts = append(parts, msg)
	}
	return strings.Join(parts, " ")
}
