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

// enrichFailures adds the container's exit code and reason to the message
// of each job failure: the Job's condition says only that the backoff limit
// was reached, while users ask "what did my container exit with". It costs
// one pod list per failed job (never per ID in the steady state) and runs in
// the writer, not in the informer handlers. Transient errors are retried
// (as for the confirming GET); a lookup that still fails keeps the
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
		if detail := m.exitDetail(ctx, id, it.obs.UID); detail != "" {
			it.obs.Message = detail + ": " + it.obs.Message
		}
	}
}

// exitDetail returns "exit code N (Reason)" of the newest terminated
// container of the job's pods, or "".
func (m *Monitor) exitDetail(ctx context.Context, id runtimeid.ID, uid string) string {
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
		return ""
	}
	return exitDetailOf(pods.Items)
}

// exitDetailOf picks the newest terminated container with a non-zero exit code.
func exitDetailOf(pods []corev1.Pod) string {
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
	if best == nil {
		return ""
	}
	parts := []string{fmt.Sprintf("exit code %d", best.ExitCode)}
	if best.Reason != "" {
		parts = append(parts, "("+best.Reason+")")
	}
	if msg := strings.TrimSpace(best.Message); msg != "" {
		parts = append(parts, msg)
	}
	return strings.Join(parts, " ")
}
