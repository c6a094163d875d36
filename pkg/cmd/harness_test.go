package cmd_test

// The harness runs kubectl gobrave commands through cobra exactly as main
// does, on fake clientsets (one per kubeconfig context) and a temp state
// database.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// k3sContext is the kubeconfig context testdata/config-k3s.yaml maps the
// k3s runtime to; "" is the current context.
const k3sContext = "k3s-ctx"

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

var uidSeq atomic.Int64

// cluster is a fake clientset whose deployments support the scale
// subresource (the fake's tracker does not), which stamps UIDs on create and
// which tells when a watch of a resource is established (the fake does not
// replay events a watch missed).
type cluster struct {
	*fake.Clientset
	mu      sync.Mutex
	watches map[string]int
}

// dryRun answers a server-side dry-run create as the API server does when
// admission allows it: with the object, storing nothing (the fake's
// tracker would store it).
func dryRun(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	if ca, ok := a.(k8stesting.CreateActionImpl); ok && len(ca.CreateOptions.DryRun) > 0 {
		return true, ca.GetObject(), nil
	}
	return false, nil, nil
}

func newCluster(objs ...k8sruntime.Object) *cluster {
	c := &cluster{Clientset: fake.NewClientset(objs...), watches: map[string]int{}}
	c.PrependReactor("create", "*", dryRun)
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", obj.GetName(), uidSeq.Add(1))))
		}
		return false, nil, nil
	})
	c.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		obj, err := c.Tracker().Get(deploymentsGVR, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment)
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID, ResourceVersion: d.ResourceVersion},
			Spec: autoscalingv1.ScaleSpec{Replicas: *d.Spec.Replicas}}, nil
	})
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		obj, err := c.Tracker().Get(deploymentsGVR, a.GetNamespace(), sc.Name)
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment).DeepCopy()
		d.Spec.Replicas = &sc.Spec.Replicas
		if err := c.Tracker().Update(deploymentsGVR, d, d.Namespace); err != nil {
			return true, nil, err
		}
		return true, sc, nil
	})
	c.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		c.mu.Lock()
		c.watches[a.GetResource().Resource]++
		c.mu.Unlock()
		return true, w, nil
	})
	return c
}

// watching reports whether a watch of resource was established.
func (c *cluster) watching(resource string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches[resource] > 0
}

// watchCount is the number of watches of resource established so far.
func (c *cluster) watchCount(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches[resource]
}

// harness is one user's machine: a state database path, an optional config
// file, an environment and two clusters (the current context and k3s-ctx).
type harness struct {
	t          *testing.T
	dir        string
	statePath  string
	configPath string
	env        map[string]string
	clusters   map[string]*cluster
	// clusterIDs, when set, are the identities of the contexts' clusters
	// (unknown otherwise, and then no cluster is checked).
	clusterIDs map[string]string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	return &harness{
		t:         t,
		dir:       dir,
		statePath: filepath.Join(dir, "data", "state.db"),
		env:       map[string]string{},
		clusters:  map[string]*cluster{"": newCluster(), k3sContext: newCluster()},
	}
}

// factory builds a new Factory, as main does once per process.
func (h *harness) factory() *cmd.Factory {
	f := cmd.NewFactory()
	f.Home = filepath.Join(h.dir, "home")
	f.Getenv = func(k string) string { return h.env[k] }
	f.StateDBFlag = h.statePath
	f.ConfigFlag = h.configPath
	f.NewClient = func(ctxName string) (kubernetes.Interface, error) {
		c, ok := h.clusters[ctxName]
		if !ok {
			return nil, fmt.Errorf("context %q does not exist in the test kubeconfig", ctxName)
		}
		return c, nil
	}
	if h.clusterIDs != nil {
		f.NewClusterID = func(ctxName string) (string, error) { return h.clusterIDs[ctxName], nil }
	}
	return f
}

// result is what a user sees of one command: both streams and the exit code.
type result struct {
	stdout, stderr string
	code           int
	msg            string // what main prints after "error: "
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs one command like main does.
func (h *harness) run(args ...string) result {
	return h.runCtx(h.t.Context(), args...)
}

// runCtx may be called from any goroutine.
func (h *harness) runCtx(ctx context.Context, args ...string) result {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	f := h.factory()
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	r := result{stdout: out.String(), code: cmd.ExitCode(err), err: err}
	if err != nil {
		r.msg = cmd.FormatError(err)
		fmt.Fprintf(errOut, "error: %s\n", r.msg)
	}
	r.stderr = errOut.String()
	return r
}

// runAsync runs a command in the background.
func (h *harness) runAsync(ctx context.Context, args ...string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- h.runCtx(ctx, args...) }()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("the command did not return within 60s")
	}
	return result{}
}

// ok runs a command that must succeed and returns its stdout.
func (h *harness) ok(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 {
		h.t.Fatalf("kubectl gobrave %s: %s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// actions counts the API requests made on every cluster.
func (h *harness) actions() int {
	n := 0
	for _, c := range h.clusters {
		n += len(c.Actions())
	}
	return n
}

func (h *harness) clearActions() {
	for _, c := range h.clusters {
		c.ClearActions()
	}
}

// describeActions lists the API requests made, for failure messages.
func (h *harness) describeActions() string {
	var out []string
	for name, c := range h.clusters {
		for _, a := range c.Actions() {
			out = append(out, fmt.Sprintf("[%s] %s %s/%s", name, a.GetVerb(), a.GetResource().Resource, a.GetSubresource()))
		}
	}
	return strings.Join(out, ", ")
}

// dbSnapshot is the whole content of the state database.
type dbSnapshot struct {
	Workloads []store.Workload
	Events    []store.Event
	Seqs      []int64
}

// snapshot reads the database directly; exists is false when there is no file.
func (h *harness) snapshot() (snap dbSnapshot, exists bool) {
	h.t.Helper()
	if _, err := os.Stat(h.statePath); errors.Is(err, fs.ErrNotExist) {
		return dbSnapshot{}, false
	}
	st, err := store.Open(h.t.Context(), h.statePath)
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	ws, err := st.List(h.t.Context(), store.Filter{All: true})
	if err != nil {
		h.t.Fatal(err)
	}
	evs, err := st.Events(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	snap = dbSnapshot{Workloads: ws, Events: evs}
	for _, e := range evs {
		snap.Seqs = append(snap.Seqs, e.Seq)
	}
	return snap, true
}

// workload reads one record directly from the database.
func (h *harness) workload(id string) store.Workload {
	h.t.Helper()
	st, err := store.Open(h.t.Context(), h.statePath)
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Get(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

// leases returns the owner holding id's monitor lease, "" when none.
func (h *harness) leases(id string) string {
	h.t.Helper()
	st, err := store.Open(h.t.Context(), h.statePath)
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	o, _, ok, err := st.LeaseHolder(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return o.ID
}

// view mirrors the documented JSON form of a workload record.
type view struct {
	RuntimeID string    `json:"runtimeID"`
	Runtime   string    `json:"runtime"`
	Namespace string    `json:"namespace"`
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	UID       string    `json:"uid"`
	State     string    `json:"state"`
	Message   string    `json:"message"`
	Reason    string    `json:"reason"`
	ExitCode  *int32    `json:"exitCode"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// eventView mirrors the documented JSON form of an event.
type eventView struct {
	RuntimeID string    `json:"runtimeID"`
	Type      string    `json:"type"`
	Message   string    `json:"message"`
	UID       string    `json:"uid"`
	Time      time.Time `json:"time"`
	Reason    string    `json:"reason"`
	ExitCode  *int32    `json:"exitCode"`
}

// ps returns `ps -a -o json`.
func (h *harness) ps(args ...string) []view {
	h.t.Helper()
	out := h.ok(append([]string{"ps", "-o", "json"}, args...)...)
	var vs []view
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		h.t.Fatalf("ps -o json: %v\n%s", err, out)
	}
	return vs
}

// state returns the recorded state of id through `ps -a -o json`.
func (h *harness) state(id string) string {
	h.t.Helper()
	for _, v := range h.ps("-a") {
		if v.RuntimeID == id {
			return v.State
		}
	}
	h.t.Fatalf("%s is not in ps -a", id)
	return ""
}

// events returns `events ID... -o json`.
func (h *harness) events(ids ...string) []eventView {
	h.t.Helper()
	out := h.ok(append([]string{"events", "-o", "json"}, ids...)...)
	var evs []eventView
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		h.t.Fatalf("events -o json: %v\n%s", err, out)
	}
	return evs
}

// history lists an ID's events as "Type: message".
func (h *harness) history(id string) []string {
	h.t.Helper()
	var out []string
	for _, e := range h.events(id) {
		out = append(out, string(e.Type)+": "+e.Message)
	}
	return out
}

func (h *harness) deployment(ctxName, ns, name string) (*appsv1.Deployment, error) {
	return h.clusters[ctxName].AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (h *harness) job(ctxName, ns, name string) (*batchv1.Job, error) {
	return h.clusters[ctxName].BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (h *harness) service(ctxName, ns, name string) (*corev1.Service, error) {
	return h.clusters[ctxName].CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// addPod adds pod as it is: labelled, but owned by nothing unless the test
// set owner references (a look-alike).
func (h *harness) addPod(ctxName string, pod *corev1.Pod) {
	h.t.Helper()
	if _, err := h.clusters[ctxName].CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// addOwnedPod adds pod as the controller of the workload kind/<its
// gobrave-workload label> would: owned by the Job, or by a ReplicaSet
// <name>-rs of the Deployment (made on first use).
func (h *harness) addOwnedPod(ctxName, kind string, pod *corev1.Pod) {
	h.t.Helper()
	ctx, c, name := context.Background(), h.clusters[ctxName], pod.Labels["gobrave-workload"]
	var owner metav1.OwnerReference
	switch kind {
	case "job":
		j, err := h.job(ctxName, pod.Namespace, name)
		if err != nil {
			h.t.Fatal(err)
		}
		owner = metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: j.UID, Controller: ptr(true)}
		pod.Labels[batchv1.ControllerUidLabel] = string(j.UID)
	case "deployment":
		d, err := h.deployment(ctxName, pod.Namespace, name)
		if err != nil {
			h.t.Fatal(err)
		}
		rs, err := c.AppsV1().ReplicaSets(pod.Namespace).Get(ctx, name+"-rs", metav1.GetOptions{})
		if err != nil {
			// The deployment controller's ReplicaSet: the Deployment's
			// pod template plus its hash label.
			template := *d.Spec.Template.DeepCopy()
			template.Labels = maps.Clone(template.Labels)
			if template.Labels == nil {
				template.Labels = map[string]string{}
			}
			template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "rs"
			rs, err = c.AppsV1().ReplicaSets(pod.Namespace).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
				Name: name + "-rs", Namespace: pod.Namespace, Labels: d.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr(true)}},
			}, Spec: appsv1.ReplicaSetSpec{Template: template}}, metav1.CreateOptions{})
			if err != nil {
				h.t.Fatal(err)
			}
		}
		owner = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}
	default:
		h.t.Fatalf("addOwnedPod: unknown kind %q", kind)
	}
	pod.OwnerReferences = append(pod.OwnerReferences, owner)
	h.addPod(ctxName, pod)
}

func podOf(ns, workload, podName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns, CreationTimestamp: metav1.Now(),
			Labels: map[string]string{"gobrave-workload": workload, "app": workload}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: workload, Image: "nginx:1.27"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.1.2.3",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: workload, RestartCount: 2}},
		},
	}
}

// eventually polls cond with a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// writeFile writes a file in the harness's folder and returns its path.
func (h *harness) writeFile(name, content string) string {
	h.t.Helper()
	p := filepath.Join(h.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return p
}

var columnSep = regexp.MustCompile(`\s{2,}`)

// table splits tab-writer output into rows of cells.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		rows = append(rows, columnSep.Split(strings.TrimSpace(line), -1))
	}
	return rows
}

// column returns column i of rows.
func column(rows [][]string, i int) []string {
	var out []string
	for _, r := range rows {
		if i < len(r) {
			out = append(out, r[i])
		} else {
			out = append(out, "")
		}
	}
	return out
}

func checkExit(t *testing.T, r result, want int, wantErr string) {
	t.Helper()
	if r.code != want {
		t.Fatalf("exit code %d, want %d\n%s", r.code, want, r)
	}
	if wantErr != "" && !strings.Contains(r.msg, wantErr) {
		t.Errorf("error %q does not contain %q", r.msg, wantErr)
	}
	if wantErr == "" && want == 0 && r.msg != "" {
		t.Errorf("unexpected error %q", r.msg)
	}
}
