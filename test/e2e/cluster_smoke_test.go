package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestClusterSmoke checks the cluster the other tests stand on, with client-go and kubectl only:
// the real controllers, kwok's stages including the gobrave.test/* labels, logs, exec, contexts.
func TestClusterSmoke(t *testing.T) {
	requireCluster(t)

	t.Run("deployment becomes ready", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		createDeployment(t, ns, "web", nil)
		waitDeploymentReady(t, ns, "web")
	})

	t.Run("job completes", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		createJob(t, ns, "ok", nil, nil)
		waitJobCondition(t, ns, "ok", batchv1.JobComplete)
		pod := jobPod(t, ns, "ok")
		if got := terminatedExitCode(t, pod); got != 0 {
			t.Errorf("exit code = %d, want 0", got)
		}
	})

	t.Run("exit-code label fails the job with that code", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		createJob(t, ns, "fail", map[string]string{labelExitCode: "42"}, nil)
		waitJobCondition(t, ns, "fail", batchv1.JobFailed)
		pod := jobPod(t, ns, "fail")
		if pod.Status.Phase != corev1.PodFailed {
			t.Errorf("pod phase = %s, want Failed", pod.Status.Phase)
		}
		if got := terminatedExitCode(t, pod); got != 42 {
			t.Errorf("exit code = %d, want 42", got)
		}
	})

	t.Run("kwok chaos annotations fail the job", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		createJob(t, ns, "chaos",
			map[string]string{"pod-container-running-failed.stage.kwok.x-k8s.io": "true"},
			map[string]string{"pod-container-running-failed.stage.kwok.x-k8s.io/exit-code": "7"})
		waitJobCondition(t, ns, "chaos", batchv1.JobFailed)
		if got := terminatedExitCode(t, jobPod(t, ns, "chaos")); got != 7 {
			t.Errorf("exit code = %d, want 7", got)
		}
	})

	t.Run("held job keeps running", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		createJob(t, ns, "held", map[string]string{labelHold: "true"}, nil)
		pod := waitPodRunning(t, ns, "job-name=held")
		holdsFor(t, 3*time.Second, func() error {
			job, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), "held", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if finished(job) || job.Status.Active != 1 {
				return fmt.Errorf("held job active=%d conditions=%v", job.Status.Active, job.Status.Conditions)
			}
			p, err := client(t).CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("held pod phase = %s, want Running", p.Status.Phase)
			}
			return nil
		})
	})

	t.Run("run-for label delays completion", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		const runFor = 2 * time.Second
		createJob(t, ns, "slow", map[string]string{labelRunFor: runFor.String()}, nil)
		waitJobCondition(t, ns, "slow", batchv1.JobComplete)
		// The cluster's own timestamps (whole seconds; both truncated, so a run of at least 2 s
		// shows as at least 2 s), not the test's clock.
		state := jobPod(t, ns, "slow").Status.ContainerStatuses[0].State.Terminated
		if ran := state.FinishedAt.Sub(state.StartedAt.Time); ran < runFor {
			t.Errorf("container ran %s (%s to %s), want at least %s", ran, state.StartedAt, state.FinishedAt, runFor)
		}
	})

	t.Run("logs and exec", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		createDeployment(t, ns, "logs", nil)
		pod := waitPodRunning(t, ns, "app=logs")

		shared := "shared line " + randomSuffix(t)
		writePodLog(t, shared)
		r := kubectl(t, "logs", "-n", ns, pod.Name)
		if r.code != 0 || !strings.Contains(r.stdout, shared) {
			t.Errorf("kubectl logs does not show %q: %s", shared, r)
		}

		path := usePodLog(t, ns, pod.Name)
		own := "own line " + randomSuffix(t)
		appendLog(t, path, own)
		r = kubectl(t, "logs", "-n", ns, pod.Name, "--tail", "1")
		if r.code != 0 || strings.TrimSpace(r.stdout) != own {
			t.Errorf("kubectl logs --tail 1 = %q, want %q: %s", r.stdout, own, r)
		}

		r = kubectl(t, "exec", "-n", ns, pod.Name, "--", "echo", "hi")
		if r.code != 0 || r.stdout != "hi\n" {
			t.Errorf("kubectl exec echo hi: %s", r)
		}
	})

	t.Run("second context reaches the same cluster", func(t *testing.T) {
		t.Parallel()
		r := kubectl(t, "config", "get-contexts", "-o", "name")
		contexts := strings.Fields(r.stdout)
		if !slices.Contains(contexts, "gobrave-k3s") || len(contexts) != 2 {
			t.Fatalf("contexts = %v, want the cluster's and gobrave-k3s: %s", contexts, r)
		}
		want := kubectl(t, "get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}")
		got := kubectl(t, "--context", "gobrave-k3s", "get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}")
		if got.code != 0 || want.code != 0 || got.stdout != want.stdout || got.stdout == "" {
			t.Errorf("kube-system uid through gobrave-k3s = %q, want %q: %s", got.stdout, want.stdout, got)
		}
	})
}

func createDeployment(t *testing.T, ns, name string, podLabels map[string]string) {
	t.Helper()
	l := map[string]string{"app": name}
	for k, v := range podLabels {
		l[k] = v
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/app:1"}}},
			},
		},
	}
	if _, err := client(t).AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s/%s: %v", ns, name, err)
	}
}

func createJob(t *testing.T, ns, name string, podLabels, podAnnotations map[string]string) {
	t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.invalid/job:1"}},
				},
			},
		},
	}
	if _, err := client(t).BatchV1().Jobs(ns).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job %s/%s: %v", ns, name, err)
	}
}

func waitDeploymentReady(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, waitTimeout, func() (bool, error) {
		d, err := client(t).AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ReadyReplicas != 1 {
			return false, fmt.Errorf("deployment %s/%s readyReplicas=%d", ns, name, d.Status.ReadyReplicas)
		}
		return true, nil
	})
}

func waitJobCondition(t *testing.T, ns, name string, want batchv1.JobConditionType) {
	t.Helper()
	waitFor(t, waitTimeout, func() (bool, error) {
		j, err := client(t).BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == want && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("job %s/%s conditions: %v", ns, name, j.Status.Conditions)
	})
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobPod returns the one pod of a Job.
func jobPod(t *testing.T, ns, job string) *corev1.Pod {
	t.Helper()
	sel := labels.Set{"job-name": job}.String()
	pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("job %s/%s has %d pods, want 1", ns, job, len(pods.Items))
	}
	return &pods.Items[0]
}

// waitPodRunning waits for a running, ready pod matching the label selector.
func waitPodRunning(t *testing.T, ns, selector string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, waitTimeout, func() (bool, error) {
		pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for i, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && podReady(&p) {
				pod = &pods.Items[i]
				return true, nil
			}
		}
		return false, fmt.Errorf("no running ready pod for %q among %d", selector, len(pods.Items))
	})
	return pod
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func terminatedExitCode(t *testing.T, pod *corev1.Pod) int32 {
	t.Helper()
	if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("pod %s/%s has no terminated container: %+v", pod.Namespace, pod.Name, pod.Status.ContainerStatuses)
	}
	return pod.Status.ContainerStatuses[0].State.Terminated.ExitCode
}
