package monitor

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func terminatedPod(code int32, reason, msg string, at time.Time) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, FinishedAt: metav1.NewTime(at)}},
	}}}}
}

func TestExitDetailOf(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"no pods", nil, ""},
		{"running pod", []corev1.Pod{{}}, ""},
		{"exit 0 is not a failure detail", []corev1.Pod{terminatedPod(0, "Completed", "", now)}, ""},
		{"exit 42", []corev1.Pod{terminatedPod(42, "Error", "", now)}, "exit code 42 (Error)"},
		{"message kept", []corev1.Pod{terminatedPod(137, "OOMKilled", " out of memory ", now)}, "exit code 137 (OOMKilled) out of memory"},
		{"newest wins", []corev1.Pod{terminatedPod(1, "Error", "", now.Add(-time.Minute)), terminatedPod(3, "", "", now)}, "exit code 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitDetailOf(tt.pods); got != tt.want {
				t.Errorf("exitDetailOf() = %q, want %q", got, tt.want)
			}
		})
	}
}
