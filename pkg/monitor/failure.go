package monitor

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// podSyncWait bounds how long the writer waits, once per batch, for a pod
// informer that has not synced yet before recording a job failure without
// its exit code.
const podSyncWait = 2 * time.Second

// enrichFailures adds the container's exit code to each job failure: as a
// number (the result's exitCode) and in the message ("exit code N (Reason):
// …"), since the Job's condition says only that the backoff limit was
// reached, while users ask "what did my container exit with". It reads the
// pod informer's cache only (pods.go): no request, whatever the number of
// failed jobs. A failure whose pods are not in the cache (gone with the
// job's TTL, or pods not readable) keeps the condition's message.
func (m *Monitor) enrichFailures(ctx context.Context, items []item) {
	waited := false
	for i := range items {
		it := &items[i]
		if it.obs.Type != store.ContainerFailed || len(it.ids) == 0 {
			continue
		}
		id, err := runtimeid.Parse(it.ids[0])
		if err != nil || id.Kind != runtimeid.KindJob {
			continue
		}
		if !waited {
			waited = true
			m.waitPodCache(ctx, id.Namespace)
		}
		t := m.cachedTermination(id, it.obs.UID)
		if t == nil {
			continue
		}
		code := t.ExitCode
		it.obs.ExitCode = &code
		it.obs.Message = exitDetail(t) + ": " + it.obs.Message
	}
}

// waitPodCache waits, at most podSyncWait, for the pod informer serving ns
// to sync.
func (m *Monitor) waitPodCache(ctx context.Context, ns string) {
	m.mu.Lock()
	pc := m.podCacheLocked(ns)
	var synced func() bool
	if pc != nil && !pc.off {
		synced = pc.podsSynced
	}
	m.mu.Unlock()
	if synced == nil || synced() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, podSyncWait)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) { return synced(), nil })
}

// cachedTermination is the newest failed termination among the cached pods
// of the job uid, or nil.
func (m *Monitor) cachedTermination(id runtimeid.ID, uid string) *corev1.ContainerStateTerminated {
	if uid == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pods, ok := m.podsLocked(&subscription{id: id.String(), uid: uid})
	if !ok {
		return nil
	}
	list := make([]corev1.Pod, len(pods))
	for i, p := range pods {
		list[i] = *p
	}
	return lastFailure(list)
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
