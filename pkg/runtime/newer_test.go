package runtime

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A rollout's new pod made in the second of the old one: the one whose
// container waits is the newest, whatever the names say.
func TestNewestOwnedSameSecond(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 11, 13, 4, 0, time.UTC))
	ctrl := true
	pod := func(name, rs string, waiting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at,
			OwnerReferences: []metav1.OwnerReference{{UID: types.UID(rs), Controller: &ctrl}}}}
		st := corev1.ContainerStatus{}
		if waiting {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonImagePullBackOff}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		return p
	}
	old := pod("www-86464dcbb8-msbzf", "rs-old", false)
	neu := pod("www-65fcf5688c-4hpvv", "rs-new", true)
	owners := map[types.UID]bool{"rs-old": true, "rs-new": true}
	for _, pods := range [][]*corev1.Pod{{old, neu}, {neu, old}} {
		if got := NewestOwned(pods, owners); got != neu {
			t.Errorf("newest of the same second: %s, want the waiting %s", got.Name, neu.Name)
		}
	}
	// Not the same second: the creation time decides.
	neu.CreationTimestamp = metav1.NewTime(at.Add(-time.Second))
	if got := NewestOwned([]*corev1.Pod{old, neu}, owners); got != old {
		t.Errorf("newest: %s, want %s", got.Name, old.Name)
	}
}
