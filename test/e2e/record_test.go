package e2e

// Issue 12, "The record is always the truth": one test per defect that the lifecycle engine
// (pkg/lifecycle) fixed — the intent is recorded first with a new epoch, then the action, a
// compensating RequestFailed when the action fails, then a confirming read — and a seeded random
// walk that checks the invariants tying every record to the cluster.
//
// Every test has a namespace and a state database of its own (monEnv, monitor_test.go) and reads
// the database through the plugin (`ps -o json`, `events -o json`); only the leases, which no verb
// shows, are read with pkg/store. Where a test needs the plugin to stop at a given point, the
// cluster holds it there (a finalizer of the test's own on a Job, a ValidatingAdmissionPolicy
// that refuses a Deployment's status) or the test holds the database's write lock; no test
// relies on timing. --wait and wait get --timeout 10m, so that a wait that would hang is failed
// by the harness's bound on a command (runTimeout), never passed by its own timeout.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// holdFinalizer is a finalizer of the tests' own: a Job that carries it stays in the cluster,
// being deleted, until the test removes it, and the plugin's start waits for it to go.
const holdFinalizer = "gobrave.test/hold"

// envSeed sets the seed of TestRecordRandomWalk (a decimal uint64), to replay its verbs.
const envSeed = "GOBRAVE_E2E_SEED"

// resourceOf is kubectl's resource.group of a kind, as the plugin's confirmations print it.
var resourceOf = map[string]string{runtimeid.KindDeployment: "deployment.apps", runtimeid.KindJob: "job.batch"}

// pastOf is what a verb's confirmation says it did.
var pastOf = map[string]string{"start": "started", "stop": "stopped", "pause": "paused", "resume": "resumed", "delete": "deleted"}

// requestOf is the requested event a verb records.
var requestOf = map[string]string{"start": "StartRequested", "stop": "StopRequested", "pause": "PauseRequested", "resume": "ResumeRequested", "delete": "DeleteRequested"}

// epochTypes are the requested events that raise a record's epoch: every request but
// RequestFailed (pkg/store). An observed event is recorded once per object, type and epoch.
var epochTypes = []string{"Created", "StartRequested", "StopRequested", "PauseRequested", "ResumeRequested", "RestartRequested", "DeleteRequested", "Adopted"}

// id is the runtime ID of kind/name in the test's namespace.
func (e *monEnv) id(kind, name string) string {
	return fmt.Sprintf("%s-%s|%s|%s", runtimeid.RuntimeK8s, e.ns, kind, name)
}

// recordOf returns the record of id (`ps -a -o json`), failing the test when there is none.
func (e *monEnv) recordOf(id string) monWorkload {
	e.t.Helper()
	w, ok := e.records()[id]
	if !ok {
		e.t.Fatalf("%s is not in ps -a -o json", id)
	}
	return w
}

// checkRecord checks the state of id's record and, when uid is not empty, its UID.
func (e *monEnv) checkRecord(id, state, uid string) monWorkload {
	e.t.Helper()
	w := e.recordOf(id)
	if w.State != state || (uid != "" && w.UID != uid) {
		e.t.Errorf("%s: record state %q uid %q message %q, want state %q uid %q; history:\n%s",
			id, w.State, w.UID, w.Message, state, uid, formatEvents(e.events(id)))
	}
	return w
}

// allRecords is every record of the test's database, in every namespace (`ps -a -A -o json`).
func (e *monEnv) allRecords() map[string]monWorkload {
	e.t.Helper()
	r := e.runOK("ps", "-a", "-A", "-o", "json")
	var list []monWorkload
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		e.t.Fatalf("ps -a -A -o json: %v\n%s", err, r.stdout)
	}
	out := map[string]monWorkload{}
	for _, w := range list {
		out[w.RuntimeID] = w
	}
	return out
}

func typesOf(evs []monEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// requireEventTypes checks the types of evs, in order, exactly.
func requireEventTypes(t *testing.T, evs []monEvent, want ...string) {
	t.Helper()
	if got := typesOf(evs); !slices.Equal(got, want) {
		t.Errorf("event types %v, want %v; history:\n%s", got, want, formatEvents(evs))
	}
}

// sinceLast returns the events after the last one of type typ (nil when there is none).
func sinceLast(evs []monEvent, typ string) []monEvent {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i+1:]
		}
	}
	return nil
}

// lastRequest is the type of the last epoch-raising event of a history ("" when none).
func lastRequest(evs []monEvent) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if slices.Contains(epochTypes, evs[i].Type) {
			return evs[i].Type
		}
	}
	return ""
}

// observedTwice returns the observed events recorded a second time for the same object and type
// between two epoch-raising requests of their ID.
func observedTwice(evs []monEvent) []string {
	epoch := map[string]int{}
	seen := map[string]bool{}
	var dup []string
	for _, ev := range evs {
		if slices.Contains(epochTypes, ev.Type) {
			epoch[ev.RuntimeID]++
			continue
		}
		if !ev.observed() {
			continue
		}
		k := fmt.Sprintf("%s|%d|%s|%s", ev.RuntimeID, epoch[ev.RuntimeID], ev.UID, ev.Type)
		if seen[k] {
			dup = append(dup, ev.String())
		}
		seen[k] = true
	}
	return dup
}

// checkPrintedRecorded checks that every event a monitor printed (-o json) is in the database.
// A requested event of another process may be printed before the request has made its object:
// the store fills in its UID afterwards (SetObjectUID), so a printed empty UID matches any.
func checkPrintedRecorded(t *testing.T, stdout string, recorded []monEvent) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		var p monEvent
		if err := json.Unmarshal([]byte(line), &p); err != nil || p.RuntimeID == "" || p.Type == "" || p.Time.IsZero() {
			t.Errorf("monitor -o json printed %q, not an event (%v)", line, err)
			continue
		}
		found := slices.ContainsFunc(recorded, func(ev monEvent) bool {
			return ev.RuntimeID == p.RuntimeID && ev.Type == p.Type && ev.Message == p.Message && ev.Time.Equal(p.Time) &&
				(ev.UID == p.UID || (p.UID == "" && !p.observed()))
		})
		if !found {
			t.Errorf("the monitor printed an event that is not recorded: %s", line)
		}
	}
}

// pid is the plugin's process ID: kubectl exec()s the plugin, so it keeps kubectl's.
func (p *monProc) pid() int { return p.cmd.Process.Pid }

// kill kills the plugin with SIGKILL, as a crash would, and waits until it is gone (reaped).
func (p *monProc) kill() {
	p.t.Helper()
	if p.exited() {
		p.t.Fatalf("kubectl gobrave %s ended before the kill:\n%s", strings.Join(p.args, " "), p.result())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	<-p.done
}

// pause stops the plugin with SIGSTOP where it is; resume lets it go on (SIGCONT).
func (p *monProc) pause() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatal(err)
	}
}

func (p *monProc) resume() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		p.t.Fatal(err)
	}
}

// leaseHolder reads who holds the lease of id in the test's database (pkg/store: no verb shows it).
func (e *monEnv) leaseHolder(id string) (store.Owner, bool, error) {
	st, err := store.Open(e.t.Context(), filepath.Join(e.home, "state.db"))
	if err != nil {
		return store.Owner{}, false, err
	}
	defer st.Close()
	o, _, ok, err := st.LeaseHolder(e.t.Context(), id)
	return o, ok, err
}

// waitLeasedBy waits until the process pid holds the lease of id: its monitor has taken the ID.
func (e *monEnv) waitLeasedBy(id string, pid int) {
	e.t.Helper()
	waitFor(e.t, waitTimeout, func() (bool, error) {
		o, ok, err := e.leaseHolder(id)
		if err != nil {
			return false, err
		}
		if !ok || o.PID != pid {
			return false, fmt.Errorf("the lease of %s is held by %+v (held: %v), want pid %d", id, o, ok, pid)
		}
		return true, nil
	})
}

// lockDB takes the write lock of the test's database (BEGIN IMMEDIATE), as a long write of
// another process would: every write of the plugin waits (busy timeout, then retries) until
// unlock. Reads still work (WAL). The lock is released at the end of the test at the latest.
func (e *monEnv) lockDB() (unlock func()) {
	t := e.t
	t.Helper()
	dsn := "file:" + filepath.Join(e.home, "state.db")
	db, err := sql.Open("sqlite", dsn+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		db.Close()
		t.Fatalf("lock the state database: %v", err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			_ = tx.Rollback()
			_ = db.Close()
		})
	}
	t.Cleanup(unlock)
	// The lock is real: another writer that does not wait is refused.
	probe, err := sql.Open("sqlite", dsn+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if ptx, err := probe.BeginTx(t.Context(), nil); err == nil {
		_ = ptx.Rollback()
		t.Fatal("BEGIN IMMEDIATE did not lock the state database: another writer got in")
	}
	return unlock
}

func getJob(t testing.TB, ns, name string) (*batchv1.Job, error) {
	return client(t).BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
}

func jobRunning(j *batchv1.Job) bool { return j.Status.Ready != nil && *j.Status.Ready > 0 }

// addJobFinalizer puts holdFinalizer on the job; the end of the test removes it if it is still
// there, so that the namespace can go.
func addJobFinalizer(t *testing.T, ns, name string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, holdFinalizer)
	if _, err := client(t).BatchV1().Jobs(ns).Patch(t.Context(), name, k8stypes.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("add finalizer %s to job %s/%s: %v", holdFinalizer, ns, name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropJobFinalizer(ctx, client(t), ns, name); err != nil {
			t.Errorf("remove finalizer %s from job %s/%s: %v", holdFinalizer, ns, name, err)
		}
	})
}

// removeJobFinalizer takes holdFinalizer off the job: a deletion it held completes.
func removeJobFinalizer(t *testing.T, ns, name string) {
	t.Helper()
	if err := dropJobFinalizer(t.Context(), client(t), ns, name); err != nil {
		t.Fatalf("remove finalizer %s from job %s/%s: %v", holdFinalizer, ns, name, err)
	}
}

func dropJobFinalizer(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !slices.Contains(j.Finalizers, holdFinalizer) {
			return nil
		}
		j.Finalizers = slices.DeleteFunc(j.Finalizers, func(f string) bool { return f == holdFinalizer })
		_, err = c.BatchV1().Jobs(ns).Update(ctx, j, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// waitJobTerminating waits until the job is being deleted (and held: it is still there).
func waitJobTerminating(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	waitFor(t, waitTimeout, func() (bool, error) {
		j, err := getJob(t, ns, name)
		if err != nil {
			return false, err
		}
		job = j
		if j.DeletionTimestamp == nil {
			return false, fmt.Errorf("job %s/%s is not being deleted", ns, name)
		}
		return true, nil
	})
	return job
}

// waitJobGone waits until the job with uid is gone (its name free, or taken by another object).
func waitJobGone(t *testing.T, ns, name, uid string) {
	t.Helper()
	waitFor(t, waitTimeout, func() (bool, error) {
		j, err := getJob(t, ns, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if string(j.UID) != uid {
			return true, nil
		}
		return false, fmt.Errorf("job %s/%s %s still exists (finalizers %v)", ns, name, uid, j.Finalizers)
	})
}

// waitJobReplaced waits until a job of that name with another UID than old is running.
func waitJobReplaced(t *testing.T, ns, name, old string) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	waitFor(t, waitTimeout, func() (bool, error) {
		j, err := getJob(t, ns, name)
		if err != nil {
			return false, err
		}
		if string(j.UID) == old || !jobRunning(j) {
			return false, fmt.Errorf("job %s/%s: uid %s (old %s), ready %v", ns, name, j.UID, old, j.Status.Ready)
		}
		job = j
		return true, nil
	})
	return job
}

// finishedJob creates a job that completes at once and waits until it is recorded exited.
func (e *monEnv) finishedJob(name string) (id, uid string) {
	e.t.Helper()
	id = e.create(monJob(name))[0]
	e.runOK("wait", id, "--for=exited", "--timeout=10m")
	return id, e.recordOf(id).UID
}

// heldJob creates a job that runs until it is deleted and waits until it is recorded running.
func (e *monEnv) heldJob(name string) (id, uid string) {
	e.t.Helper()
	id = e.create(monJob(name, labelHold+"=true"))[0]
	e.runOK("wait", id, "--for=started", "--timeout=10m")
	return id, e.recordOf(id).UID
}

// requireExit checks a command's exit code and, for a failure, that stderr is one error line.
func requireExit(t *testing.T, what string, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit code %d, want %d\n%s", what, r.code, code, r)
	}
	if code != 0 {
		requireOneLineError(t, r)
	}
}

// frozenMessage is what the API server answers to an update of a frozen deployment's status.
const frozenMessage = "gobrave e2e: this deployment's status is frozen"

// freezeDeploymentStatus makes the API server refuse every update of the deployment's status (a
// ValidatingAdmissionPolicy, built into kube-apiserver), so that its controller cannot report
// what it did: status.observedGeneration stays behind the spec and the deployment's state cannot
// be told. It returns when the freeze is in force, with a function that lifts it, waits until a
// status update is admitted again and nudges the controller to report at once.
func freezeDeploymentStatus(t *testing.T, ns, name string) (thaw func()) {
	t.Helper()
	c := client(t)
	policy := "gobrave-e2e-freeze-" + ns
	fail := admissionv1.Fail
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					ResourceNames: []string{name},
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Update},
						Rule: admissionv1.Rule{
							APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments/status"},
						},
					},
				}},
			},
			Validations: []admissionv1.Validation{{Expression: "false", Message: frozenMessage}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(t.Context(), vap, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingAdmissionPolicy %s: %v", policy, err)
	}
	remove := func(ctx context.Context) error {
		err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := remove(ctx); err != nil {
			t.Errorf("remove ValidatingAdmissionPolicy %s: %v", policy, err)
		}
	})
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingAdmissionPolicyBinding %s: %v", policy, err)
	}
	// A dry-run status update goes through admission without changing anything.
	dryRun := func() error {
		d, err := c.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, err = c.AppsV1().Deployments(ns).UpdateStatus(t.Context(), d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	waitFor(t, waitTimeout, func() (bool, error) {
		err := dryRun()
		if err != nil && strings.Contains(err.Error(), frozenMessage) {
			return true, nil
		}
		return false, fmt.Errorf("the status of deployment %s/%s is not frozen yet (dry-run update: %v)", ns, name, err)
	})
	return func() {
		t.Helper()
		if err := remove(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, waitTimeout, func() (bool, error) {
			err := dryRun()
			return err == nil, err
		})
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"gobrave.test/thawed":%q}}}`, time.Now().UTC().Format(time.RFC3339Nano))
		if _, err := c.AppsV1().Deployments(ns).Patch(t.Context(), name, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("nudge deployment %s/%s: %v", ns, name, err)
		}
	}
}

// settled reports whether a deployment has done what its spec says: scaled to 0 with no replica
// left, or one ready replica, its status current.
func deploymentSettled(d *appsv1.Deployment) bool {
	if d.DeletionTimestamp != nil || d.Status.ObservedGeneration < d.Generation {
		return false
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if want == 0 {
		return d.Status.Replicas == 0
	}
	return d.Status.Replicas == want && d.Status.ReadyReplicas == want
}

// jobSettled reports whether a job is finished, suspended (pause), or is a held job whose pod
// runs.
func jobSettled(j *batchv1.Job) bool {
	if j.DeletionTimestamp != nil {
		return false
	}
	return jobFinished(j) != "" || jobSuspended(j) || (j.Spec.Template.Labels[labelHold] != "" && jobRunning(j))
}

// jobSuspended reports whether the job controller has suspended a job asked to suspend: its
// Suspended condition is true and no pod is active.
func jobSuspended(j *batchv1.Job) bool {
	if j.Spec.Suspend == nil || !*j.Spec.Suspend || j.Status.Active > 0 {
		return false
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobFinished is "Complete" or "Failed" for a finished job, else "".
func jobFinished(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return string(c.Type)
		}
	}
	return ""
}

// waitSettled waits until every Deployment and Job of the namespace is settled, none being
// deleted.
func waitSettled(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	c := client(t)
	waitFor(t, timeout, func() (bool, error) {
		ds, err := c.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		js, err := c.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var busy []string
		for i := range ds.Items {
			if d := &ds.Items[i]; !deploymentSettled(d) {
				busy = append(busy, fmt.Sprintf("deployment/%s (generation %d observed %d, replicas %v status %d ready %d, deleting %v)",
					d.Name, d.Generation, d.Status.ObservedGeneration, d.Spec.Replicas, d.Status.Replicas, d.Status.ReadyReplicas, d.DeletionTimestamp != nil))
			}
		}
		for i := range js.Items {
			if j := &js.Items[i]; !jobSettled(j) {
				busy = append(busy, fmt.Sprintf("job/%s (ready %v, conditions %v, deleting %v)", j.Name, j.Status.Ready, j.Status.Conditions, j.DeletionTimestamp != nil))
			}
		}
		if len(busy) > 0 {
			return false, fmt.Errorf("not settled in %s: %s", ns, strings.Join(busy, "; "))
		}
		return true, nil
	})
}

// TestRecordSecondStop (issue 12, case 1): a second stop, then two pauses, of a stopped
// deployment and of a stopped job are each confirmed at once: exit 0 with --wait, the record
// exited (the job's "stopped"), every request with a confirming observation of its own, and
// nothing left for recover.
func TestRecordSecondStop(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	for _, kind := range []string{runtimeid.KindDeployment, runtimeid.KindJob} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newMonEnv(t)
			s, end := monDeployment("twice"), "ContainerExited"
			if kind == runtimeid.KindJob {
				s, end = monJob("twice", labelHold+"=true"), "ContainerDeleted"
			}
			id := e.create(s)[0]
			e.runOK("wait", id, "--for=started", "--timeout=10m")
			uid := e.recordOf(id).UID
			want := []string{"Created", "ContainerStarted"}
			verbs := []string{"stop", "stop", "pause", "pause"}
			if kind == runtimeid.KindJob {
				// A job's pause suspends it: a stopped job has nothing to pause.
				verbs = verbs[:2]
			}
			for _, verb := range verbs {
				r := e.run(verb, id, "--wait", "--timeout=10m")
				requireExit(t, verb+" --wait", r, 0)
				if w := fmt.Sprintf("%s/twice %s (%s)\n", resourceOf[kind], pastOf[verb], id); r.stdout != w {
					t.Errorf("%s printed %q, want %q", verb, r.stdout, w)
				}
				w := e.checkRecord(id, "exited", uid)
				if kind == runtimeid.KindJob && w.Message != "stopped" {
					t.Errorf("after %s: message %q, want \"stopped\"", verb, w.Message)
				}
				switch kind {
				case runtimeid.KindDeployment:
					if d := getDeployment(t, e.ns, "twice"); *d.Spec.Replicas != 0 || d.Status.Replicas != 0 {
						t.Errorf("after %s: deployment replicas %d, status %d, want 0 and 0", verb, *d.Spec.Replicas, d.Status.Replicas)
					}
				case runtimeid.KindJob:
					if _, err := getJob(t, e.ns, "twice"); !apierrors.IsNotFound(err) {
						t.Errorf("after %s: get job: %v, want NotFound", verb, err)
					}
				}
				want = append(want, requestOf[verb], end)
			}
			evs := e.events(id)
			requireEventTypes(t, evs, want...)
			for _, ev := range evs {
				if ev.UID != uid {
					t.Errorf("event %s is not about the object %s", ev, uid)
				}
			}
			if got := lastLine(e.runOK("recover", "--once").stdout); got != "reattached 0, changed 0, now terminal 0" {
				t.Errorf("recover --once after the stops: %q, want nothing left to do", got)
			}
		})
	}
}

// TestRecordStartUnderLease (issue 12, case 2): while `monitor --all --follow` in another process
// holds the lease of a running deployment or job, `start --wait` and `resume --wait` of it return
// at once, exit 0, leave the object alone and record the confirmation under their own epoch; the
// monitor keeps the lease.
func TestRecordStartUnderLease(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	for _, kind := range []string{runtimeid.KindDeployment, runtimeid.KindJob} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newMonEnv(t)
			s := monDeployment("busy")
			if kind == runtimeid.KindJob {
				s = monJob("busy", labelHold+"=true")
			}
			id := e.create(s)[0]
			e.runOK("wait", id, "--for=started", "--timeout=10m")
			uid := e.recordOf(id).UID
			mon := e.start("monitor", "--all", "--follow", "-o", "json")
			e.waitLeasedBy(id, mon.pid())

			for _, verb := range []string{"start", "resume"} {
				r := e.run(verb, id, "--wait", "--timeout=10m")
				requireExit(t, verb+" --wait under another process's lease", r, 0)
				if w := fmt.Sprintf("%s/busy %s (%s)\n", resourceOf[kind], pastOf[verb], id); r.stdout != w {
					t.Errorf("%s printed %q, want %q", verb, r.stdout, w)
				}
				e.checkRecord(id, "running", uid)
				switch kind {
				case runtimeid.KindDeployment:
					if d := getDeployment(t, e.ns, "busy"); string(d.UID) != uid || *d.Spec.Replicas != 1 || d.Status.ReadyReplicas != 1 {
						t.Errorf("after %s: deployment uid %s replicas %d ready %d, want %s, 1 and 1", verb, d.UID, *d.Spec.Replicas, d.Status.ReadyReplicas, uid)
					}
				case runtimeid.KindJob:
					if j, err := getJob(t, e.ns, "busy"); err != nil || string(j.UID) != uid || !jobRunning(j) {
						t.Errorf("after %s: the running job was not left alone: %v, %+v", verb, err, j)
					}
				}
			}
			if o, ok, err := e.leaseHolder(id); err != nil || !ok || o.PID != mon.pid() {
				t.Errorf("after the starts the lease of %s is held by %+v (held %v, %v), want the monitor (pid %d)", id, o, ok, err, mon.pid())
			}
			evs := e.events(id)
			requireEventTypes(t, evs, "Created", "ContainerStarted", "StartRequested", "ContainerStarted", "ResumeRequested", "ContainerStarted")
			r := mon.interrupt()
			checkPrintedRecorded(t, r.stdout, e.events(id))
		})
	}
}

// TestRecordStopThenStart (issue 12, case 3): `stop job/x` then `start job/x` ends with the job
// running again under a new UID, never deleted: the start waits for the stop's foreground
// deletion to finish before it creates the job again, and the old job's deletion is ignored.
func TestRecordStopThenStart(t *testing.T) {
	requireCluster(t)
	t.Parallel()

	t.Run("back to back while a monitor follows", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, oldUID := e.heldJob("task")
		mon := e.start("monitor", "--all", "--follow", "-o", "json")
		e.waitLeasedBy(id, mon.pid())

		r := e.run("stop", id)
		requireExit(t, "stop", r, 0)
		r = e.run("start", id, "--wait", "--timeout=10m")
		requireExit(t, "start --wait right after stop", r, 0)
		if w := fmt.Sprintf("job.batch/task started (%s)\n", id); r.stdout != w {
			t.Errorf("start printed %q, want %q", r.stdout, w)
		}
		j := waitJobReplaced(t, e.ns, "task", oldUID)
		e.checkRecord(id, "running", string(j.UID))
		// The old job is gone (its name was taken again): whatever the monitor saw of it is in.
		printed := mon.interrupt()
		if got := lastLine(e.runOK("recover", "--once").stdout); got != "reattached 1, changed 0, now terminal 0" {
			t.Errorf("recover --once: %q, want the running job reattached and nothing changed", got)
		}
		e.checkRecord(id, "running", string(j.UID))
		evs := e.events(id)
		after := sinceLast(evs, "StartRequested")
		if !slices.ContainsFunc(after, func(ev monEvent) bool { return ev.Type == "ContainerStarted" && ev.UID == string(j.UID) }) ||
			slices.ContainsFunc(after, func(ev monEvent) bool { return ev.Type != "ContainerStarted" }) {
			t.Errorf("after StartRequested: %v, want only ContainerStarted of the new job %s; history:\n%s", typesOf(after), j.UID, formatEvents(evs))
		}
		checkPrintedRecorded(t, printed.stdout, evs)
	})

	t.Run("start waits for the deletion a finalizer holds", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, oldUID := e.heldJob("task")
		addJobFinalizer(t, e.ns, "task")
		requireExit(t, "stop", e.run("stop", id), 0)
		waitJobTerminating(t, e.ns, "task")

		start := e.start("start", id, "--wait", "--timeout=10m")
		e.waitStates(waitTimeout, map[string]string{id: "starting"})
		// The old job is held: nothing new may exist yet, and the start is still waiting.
		if j, err := getJob(t, e.ns, "task"); err != nil || string(j.UID) != oldUID {
			t.Fatalf("while the old job is held: %v, job %+v, want the old job %s alone", err, j, oldUID)
		}
		if start.exited() {
			t.Fatalf("start returned while the old job was still being deleted:\n%s", start.result())
		}
		removeJobFinalizer(t, e.ns, "task")
		r := start.wait(runTimeout)
		requireExit(t, "start --wait", r, 0)
		if w := fmt.Sprintf("job.batch/task started (%s)\n", id); r.stdout != w {
			t.Errorf("start printed %q, want %q", r.stdout, w)
		}
		j := waitJobReplaced(t, e.ns, "task", oldUID)
		e.checkRecord(id, "running", string(j.UID))
		evs := e.events(id)
		requireEventTypes(t, evs, "Created", "ContainerStarted", "StopRequested", "StartRequested", "ContainerStarted")
		if last := evs[len(evs)-1]; last.UID != string(j.UID) {
			t.Errorf("the last ContainerStarted is about %s, want the new job %s", last.UID, j.UID)
		}
	})
}

// TestRecordKill (issue 12, case 4): the intent is recorded before the cluster changes, so a
// plugin killed with SIGKILL in the middle of a start leaves a record that is not terminal, and
// `recover --once` makes it match the cluster. The start is held where the test wants it: the
// previous job of the name is being deleted and held by a finalizer (between the intent and the
// action), or the test holds the database's write lock (between the action and its record).
func TestRecordKill(t *testing.T) {
	requireCluster(t)
	t.Parallel()

	t.Run("between the intent and the action", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, oldUID := e.heldJob("task")
		addJobFinalizer(t, e.ns, "task")
		requireExit(t, "stop", e.run("stop", id), 0)
		waitJobTerminating(t, e.ns, "task")

		start := e.start("start", id)
		e.waitStates(waitTimeout, map[string]string{id: "starting"})
		start.kill()

		e.checkRecord(id, "starting", "")
		if evs := e.events(id); lastRequest(evs) != "StartRequested" || evs[len(evs)-1].Type != "StartRequested" {
			t.Errorf("after the kill the history ends with %v, want the start's intent; history:\n%s", typesOf(evs), formatEvents(evs))
		}
		if j, err := getJob(t, e.ns, "task"); err != nil || string(j.UID) != oldUID || j.DeletionTimestamp == nil {
			t.Fatalf("after the kill: %v, %+v; want only the old job %s, being deleted", err, j, oldUID)
		}

		removeJobFinalizer(t, e.ns, "task")
		waitJobGone(t, e.ns, "task", oldUID)
		r := e.runOK("recover", "--once")
		if got := lastLine(r.stdout); got != "reattached 1, changed 1, now terminal 1" {
			t.Errorf("recover --once: %q, want the started record found gone", got)
		}
		e.checkRecord(id, "deleted", "")
		evs := e.events(id)
		if got := typesOf(sinceLast(evs, "StartRequested")); !slices.Equal(got, []string{"ContainerDeleted"}) {
			t.Errorf("after the start's intent: %v, want ContainerDeleted; history:\n%s", got, formatEvents(evs))
		}
		// What recover left is usable: the job runs again.
		r = e.run("start", id, "--wait", "--timeout=10m")
		requireExit(t, "start --wait after recover", r, 0)
		j := waitJobReplaced(t, e.ns, "task", oldUID)
		e.checkRecord(id, "running", string(j.UID))
	})

	t.Run("between the action and its record", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, oldUID := e.heldJob("task")
		addJobFinalizer(t, e.ns, "task")
		requireExit(t, "stop", e.run("stop", id), 0)
		waitJobTerminating(t, e.ns, "task")

		start := e.start("start", id)
		e.waitStates(waitTimeout, map[string]string{id: "starting"})
		unlock := e.lockDB()
		removeJobFinalizer(t, e.ns, "task")
		// The plugin creates the new job; recording its UID waits for our lock.
		j := waitJobReplaced(t, e.ns, "task", oldUID)
		start.kill()
		unlock()

		e.checkRecord(id, "starting", "")
		if evs := e.events(id); evs[len(evs)-1].Type != "StartRequested" {
			t.Errorf("after the kill the history ends with %v, want the start's intent; history:\n%s", typesOf(evs), formatEvents(evs))
		}
		r := e.runOK("recover", "--once")
		if got := lastLine(r.stdout); got != "reattached 1, changed 1, now terminal 0" {
			t.Errorf("recover --once: %q, want the new job found running", got)
		}
		e.checkRecord(id, "running", string(j.UID))
		evs := e.events(id)
		after := sinceLast(evs, "StartRequested")
		if len(after) != 1 || after[0].Type != "ContainerStarted" || after[0].UID != string(j.UID) {
			t.Errorf("after the start's intent: %v, want one ContainerStarted of %s; history:\n%s", typesOf(after), j.UID, formatEvents(evs))
		}
	})
}

// TestRecordSupersededStart: a request that a later one superseded and whose action then fails
// compensates with a RequestFailed of its own epoch, which must leave the record to the later
// request. Found by TestRecordRandomWalk (seed 1796101485678636929): a `start` and a `resume` of
// a deleted job raced; the resume made the job, the start's create was refused (AlreadyExists),
// and its RequestFailed put the deleted job's UID back on the record, so that the deletion of
// that old job was then recorded against it: deleted, while the resumed job runs. Here the start
// is held with SIGSTOP while it waits for the old job to go, so that the resume creates the job
// first, every time.
func TestRecordSupersededStart(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	e := newMonEnv(t)
	id, oldUID := e.heldJob("task")
	addJobFinalizer(t, e.ns, "task")
	requireExit(t, "delete", e.run("delete", id), 0)
	waitJobTerminating(t, e.ns, "task")
	e.checkRecord(id, "deleted", oldUID)

	// The start records its intent, then waits for the old job to go; it is held there.
	start := e.start("start", id)
	e.waitStates(waitTimeout, map[string]string{id: "starting"})
	start.pause()
	removeJobFinalizer(t, e.ns, "task")
	waitJobGone(t, e.ns, "task", oldUID)

	// A later request runs the job again.
	requireExit(t, "resume --wait", e.run("resume", id, "--wait", "--timeout=10m"), 0)
	job := waitJobReplaced(t, e.ns, "task", oldUID)
	e.checkRecord(id, "running", string(job.UID))

	// The start goes on: its create is refused, the job exists; it compensates its own request.
	start.resume()
	r := start.wait(runTimeout)
	if r.code != 0 && r.code != 1 {
		t.Errorf("the superseded start: %s", r)
	}
	t.Logf("the superseded start: exit code %d, stderr %q", r.code, r.stderr)
	if j, err := getJob(t, e.ns, "task"); err != nil || j.UID != job.UID {
		t.Fatalf("the resumed job %s was replaced: %v, %+v", job.UID, err, j)
	}
	// The resume owns the record: running, about the job it made, before and after recover.
	e.checkRecord(id, "running", string(job.UID))
	if got := lastLine(e.runOK("recover", "--once").stdout); got != "reattached 1, changed 0, now terminal 0" {
		t.Errorf("recover --once: %q, want the running job reattached and nothing changed", got)
	}
	e.checkRecord(id, "running", string(job.UID))
}

// TestRecordFollowPicksUp (issue 12, case 5): `monitor --all --follow` takes on an ID that becomes
// non-terminal while it runs whatever the event: a record adopted from the cluster, a stop of an
// exited record. The monitor is up (it holds the lease of a running "anchor") before the event.
func TestRecordFollowPicksUp(t *testing.T) {
	requireCluster(t)
	t.Parallel()

	t.Run("adopted", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		anchor := e.create(monDeployment("anchor"))[0]
		mon := e.start("monitor", "--all", "--follow", "-o", "json")
		e.waitLeasedBy(anchor, mon.pid())

		// A colleague's database made it; ours adopts it.
		colleague := []string{"GOBRAVE_HOME=" + t.TempDir()}
		if r := runWith(t, runOpts{env: colleague}, "create", "batch", "-n", e.ns, "--kind", "job", "--image", monImage, "--label", labelHold+"=true"); r.code != 0 {
			t.Fatalf("the colleague's create: %s", r)
		}
		var uid string
		waitFor(t, waitTimeout, func() (bool, error) {
			j, err := getJob(t, e.ns, "batch")
			if err != nil {
				return false, err
			}
			uid = string(j.UID)
			if !jobRunning(j) {
				return false, errors.New("job batch not running yet")
			}
			return true, nil
		})
		batch := e.id(runtimeid.KindJob, "batch")
		r := e.runOK("adopt")
		if want := fmt.Sprintf("job.batch/batch adopted (%s, running, image registry.invalid/gobrave-e2e:1)", batch); !strings.Contains(r.stdout, want) {
			t.Fatalf("adopt printed %q, want %q", r.stdout, want)
		}
		e.waitLeasedBy(batch, mon.pid())

		if r := kubectl(t, "delete", "job", "batch", "-n", e.ns); r.code != 0 {
			t.Fatalf("kubectl delete job: %s", r)
		}
		e.waitStates(waitTimeout, map[string]string{batch: "deleted"})
		evs := e.events(batch)
		if last := evs[len(evs)-1]; last.Type != "ContainerDeleted" || last.UID != uid {
			t.Errorf("last event %s, want ContainerDeleted of %s", last, uid)
		}
		r = mon.interrupt()
		if !strings.Contains(r.stdout, `"type":"ContainerDeleted"`) {
			t.Errorf("the monitor did not print the deletion it recorded:\n%s", r.stdout)
		}
		checkPrintedRecorded(t, r.stdout, e.events(anchor, batch))
	})

	t.Run("stop of an exited record", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		ids := e.create(monDeployment("anchor"), monDeployment("web"))
		anchor, web := ids[0], ids[1]
		e.runOK("wait", anchor, web, "--for=started", "--timeout=10m")
		requireExit(t, "stop --wait", e.run("stop", web, "--wait", "--timeout=10m"), 0)
		// Behind the plugin's back it runs again: the record still says exited, and nothing
		// monitors a terminal record.
		if r := kubectl(t, "scale", "deployment/web", "-n", e.ns, "--replicas=1"); r.code != 0 {
			t.Fatalf("kubectl scale: %s", r)
		}
		waitFor(t, waitTimeout, func() (bool, error) {
			if d := getDeployment(t, e.ns, "web"); !deploymentSettled(d) || d.Status.ReadyReplicas != 1 {
				return false, errors.New("deployment web not ready again")
			}
			return true, nil
		})
		e.checkRecord(web, "exited", "")

		mon := e.start("monitor", "--all", "--follow", "-o", "json")
		e.waitLeasedBy(anchor, mon.pid())
		if _, ok, err := e.leaseHolder(web); err != nil || ok {
			t.Fatalf("the exited record of %s is leased (%v, %v) before the stop", web, ok, err)
		}

		// The deployment's controller cannot report the scale-down: the stop cannot confirm it.
		thaw := freezeDeploymentStatus(t, e.ns, "web")
		r := e.run("stop", web)
		requireExit(t, "stop of the exited record", r, 0)
		e.checkRecord(web, "stopping", "")
		if d := getDeployment(t, e.ns, "web"); *d.Spec.Replicas != 0 || d.Status.ObservedGeneration >= d.Generation {
			t.Fatalf("deployment web: replicas %d, generation %d observed %d; want 0 and its status behind", *d.Spec.Replicas, d.Generation, d.Status.ObservedGeneration)
		}
		e.waitLeasedBy(web, mon.pid())
		thaw()
		e.waitStates(waitTimeout, map[string]string{web: "exited"})
		evs := e.events(web)
		if got := typesOf(sinceLast(evs, "StopRequested")); !slices.Equal(got, []string{"ContainerExited"}) {
			t.Errorf("after the second stop: %v, want ContainerExited; history:\n%s", got, formatEvents(evs))
		}
		r = mon.interrupt()
		checkPrintedRecorded(t, r.stdout, e.events(anchor, web))
	})
}

// bindRunbook binds the Role of docs/rbac.yaml in ns to the ServiceAccount "runbook" of
// saNamespace (made by saKubeconfig).
func bindRunbook(t *testing.T, ns, saNamespace string) {
	t.Helper()
	c := client(t)
	raw, err := os.ReadFile(filepath.Join(harness.root, "docs", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("docs/rbac.yaml: %v", err)
	}
	if _, err := c.RbacV1().Roles(ns).Create(t.Context(), &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "runbook"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "runbook", Namespace: saNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// requestLine matches the requests client-go logs at -v=6, with the URL and the status.
var requestLine = regexp.MustCompile(`"Response" verb="GET" url="[^"]*?(/apis/(?:apps|batch)/v1/(?:namespaces/[^/]+/)?(?:deployments|jobs))\?[^"]*" status="(\d+)`)

// TestRecordRBACManyNamespaces (issue 12, case 6): a ServiceAccount bound to docs/rbac.yaml in 11
// namespaces — more than the 10 above which the monitor uses one cluster-wide informer per kind,
// which it may not list — recovers all of them: `recover --once` records what changed behind its
// back, and `recover` follows; the cluster-wide lists are refused (403) and per-namespace ones
// take over.
func TestRecordRBACManyNamespaces(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	const n = 11
	nss := make([]string, n)
	for i := range nss {
		nss[i] = newNamespace(t)
	}
	kc := saKubeconfig(t, nss[0])
	for _, ns := range nss[1:] {
		bindRunbook(t, ns, nss[0])
	}
	home := t.TempDir()
	e := &monEnv{t: t, ns: nss[0], home: home, env: []string{"KUBECONFIG=" + kc, "GOBRAVE_HOME=" + home}}

	// A held job and a deployment in each namespace, created by the ServiceAccount.
	type made struct{ job, web string }
	ids := make([]made, n)
	errs := make([]error, 2*n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, ns := range nss {
		ids[i] = made{job: fmt.Sprintf("k8s-%s|job|task", ns), web: fmt.Sprintf("k8s-%s|deployment|web", ns)}
		for k, args := range [][]string{
			{"gobrave", "create", "task", "-n", ns, "--kind", "job", "--image", monImage, "--label", labelHold + "=true"},
			{"gobrave", "create", "web", "-n", ns, "--image", monImage},
		} {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				r, err := monExec(t.Context(), e.env, runTimeout, "kubectl", args...)
				if err == nil && r.code != 0 {
					err = fmt.Errorf("kubectl %s as the ServiceAccount: %s", strings.Join(args, " "), r)
				}
				errs[2*i+k] = err
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	// Behind the plugin's back (as admin): jobs deleted in 0-2, deployments scaled to 0 in 3-5,
	// a deployment deleted in 6.
	want := map[string]string{}
	for i, ns := range nss {
		want[ids[i].job], want[ids[i].web] = "running", "running"
		switch {
		case i < 3:
			if r := kubectl(t, "delete", "job", "task", "-n", ns); r.code != 0 {
				t.Fatalf("kubectl delete job: %s", r)
			}
			want[ids[i].job] = "deleted"
		case i < 6:
			if r := kubectl(t, "scale", "deployment/web", "-n", ns, "--replicas=0"); r.code != 0 {
				t.Fatalf("kubectl scale: %s", r)
			}
			want[ids[i].web] = "exited"
		case i == 6:
			if r := kubectl(t, "delete", "deployment", "web", "-n", ns); r.code != 0 {
				t.Fatalf("kubectl delete deployment: %s", r)
			}
			want[ids[i].web] = "deleted"
		}
	}
	for _, ns := range nss {
		waitSettled(t, ns, 3*time.Minute)
	}

	r := e.run("recover", "--once")
	requireExit(t, "recover --once as the ServiceAccount over 11 namespaces", r, 0)
	if got := lastLine(r.stdout); got != "reattached 22, changed 22, now terminal 7" {
		t.Errorf("recover --once: %q, want \"reattached 22, changed 22, now terminal 7\"\n%s", got, r)
	}
	if r.stderr != "" {
		t.Errorf("recover --once wrote to stderr:\n%s", r.stderr)
	}
	ws := e.allRecords()
	for id, st := range want {
		if ws[id].State != st {
			t.Errorf("%s: %q after recover --once, want %q", id, ws[id].State, st)
		}
	}

	// The same pass again, logging its requests: the cluster-wide lists are refused and the
	// namespaces' own are served.
	r = e.run("recover", "--once", "-v=6")
	requireExit(t, "recover --once -v=6", r, 0)
	if got := lastLine(r.stdout); got != "reattached 15, changed 0, now terminal 0" {
		t.Errorf("second recover --once: %q, want \"reattached 15, changed 0, now terminal 0\"", got)
	}
	status := map[string]string{}
	for _, m := range requestLine.FindAllStringSubmatch(r.stderr, -1) {
		status[m[1]] = m[2]
	}
	for _, path := range []string{"/apis/batch/v1/jobs", "/apis/apps/v1/deployments"} {
		if status[path] != "403" {
			t.Errorf("no refused (403) cluster-wide request for %s among %v: did the monitor use a cluster-wide informer?", path, status)
		}
	}
	// Each namespace's informer of a kind serves the live records of that kind there.
	for i, ns := range nss {
		for id, path := range map[string]string{
			ids[i].job: "/apis/batch/v1/namespaces/" + ns + "/jobs",
			ids[i].web: "/apis/apps/v1/namespaces/" + ns + "/deployments",
		} {
			if want[id] == "running" && status[path] != "200" {
				t.Errorf("no successful request for %s (got %q), where %s is running", path, status[path], id)
			}
		}
	}

	// Following: recover without --once records a deletion in the eleventh namespace.
	rec := e.start("recover")
	last := ids[n-1]
	e.waitLeasedBy(last.web, rec.pid())
	e.waitLeasedBy(last.job, rec.pid())
	if r := kubectl(t, "delete", "deployment", "web", "-n", nss[n-1]); r.code != 0 {
		t.Fatalf("kubectl delete deployment: %s", r)
	}
	if r := kubectl(t, "delete", "job", "task", "-n", nss[n-1]); r.code != 0 {
		t.Fatalf("kubectl delete job: %s", r)
	}
	waitFor(t, waitTimeout, func() (bool, error) {
		ws := e.allRecords()
		if ws[last.web].State == "deleted" && ws[last.job].State == "deleted" {
			return true, nil
		}
		return false, fmt.Errorf("%s %q, %s %q", last.web, ws[last.web].State, last.job, ws[last.job].State)
	})
	if r := rec.interrupt(); strings.Contains(r.stderr, "forbidden") {
		t.Errorf("recover:\n%s", r)
	}
}

// ownedPod returns the pod of the namespace whose controller is of kind (ReplicaSet or Job).
func ownedPod(t *testing.T, ns, controllerKind string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, waitTimeout, func() (bool, error) {
		pods, err := client(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == controllerKind && p.Status.Phase == corev1.PodRunning && podReady(p) {
				pod = p
				return true, nil
			}
		}
		return false, fmt.Errorf("no running pod controlled by a %s among %d", controllerKind, len(pods.Items))
	})
	return pod
}

// TestRecordOneNameTwoKinds (issue 12, case 7): a job named like a recorded deployment is refused
// with exit 2 before any API call and changes nothing; when both kinds exist anyway (a colleague's
// database made the job), logs, exec and inspect of each find its own pod by ownership, and the
// deployment's Service selects only the deployment's pod.
func TestRecordOneNameTwoKinds(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	e := newMonEnv(t)
	web := e.id(runtimeid.KindDeployment, "web")
	if r := e.run("create", "web", "--image", monImage, "--port", "80", "--expose"); r.code != 0 || r.stdout != web+"\n" {
		t.Fatalf("create web: %s", r)
	}
	e.runOK("wait", web, "--for=started", "--timeout=10m")
	evsBefore := e.events(web)

	r := e.run("create", "web", "--kind", "job", "--image", monImage)
	requireExit(t, "create of a job named like the deployment", r, 2)
	if !strings.Contains(r.stderr, web) || !strings.Contains(r.stderr, "same name") || r.stdout != "" {
		t.Errorf("the refusal does not name %s and the same name:\n%s", web, r)
	}
	// Before any API call: with a kubeconfig whose server refuses every connection the answer is
	// the same.
	unreachable := append(slices.Clone(e.env), "KUBECONFIG="+kubeconfigFor(t, "https://127.0.0.1:1"))
	r2 := runWith(t, runOpts{env: unreachable}, "create", "web", "-n", e.ns, "--kind", "job", "--image", monImage)
	if r2.code != 2 || r2.stderr != r.stderr {
		t.Errorf("with an unreachable API server the refusal differs (an API call was made?):\n%s\nwant exit 2 and\n%s", r2, r.stderr)
	}
	if _, err := getJob(t, e.ns, "web"); !apierrors.IsNotFound(err) {
		t.Errorf("get job web after the refusal: %v, want NotFound", err)
	}
	if ws := e.records(); len(ws) != 1 || ws[web].State != "running" {
		t.Errorf("records after the refusal: %+v, want only %s running", ws, web)
	}
	if evs := e.events(web); len(evs) != len(evsBefore) {
		t.Errorf("the refusal recorded events: %s", formatEvents(evs[len(evsBefore):]))
	}

	// A colleague's database does not know the deployment: now both kinds have the name.
	colleague := []string{"GOBRAVE_HOME=" + t.TempDir()}
	job := e.id(runtimeid.KindJob, "web")
	if r := runWith(t, runOpts{env: colleague}, "create", "web", "-n", e.ns, "--kind", "job", "--image", monImage, "--label", labelHold+"=true"); r.code != 0 {
		t.Fatalf("the colleague's create: %s", r)
	}
	depPod, jobPod := ownedPod(t, e.ns, "ReplicaSet"), ownedPod(t, e.ns, "Job")
	for _, p := range []*corev1.Pod{depPod, jobPod} {
		if p.Labels["gobrave-workload"] != "web" {
			t.Fatalf("pod %s labels %v: both kinds' pods should carry gobrave-workload=web", p.Name, p.Labels)
		}
	}
	usePodLog(t, e.ns, depPod.Name)
	usePodLog(t, e.ns, jobPod.Name)
	firstLine := func(p *corev1.Pod) string { return fmt.Sprintf("gobrave-e2e: log of %s/%s", e.ns, p.Name) }

	type side struct {
		who       string
		env       []string
		ref       string
		pod, othr *corev1.Pod
	}
	for _, s := range []side{
		{"mine", e.env, "deployment/web", depPod, jobPod},
		{"the colleague's", colleague, "job/web", jobPod, depPod},
	} {
		as := func(args ...string) result {
			t.Helper()
			r := runWith(t, runOpts{env: s.env}, append([]string{args[0], "-n", e.ns}, args[1:]...)...)
			if r.code != 0 {
				t.Fatalf("%s: kubectl gobrave %s: %s", s.who, strings.Join(args, " "), r)
			}
			return r
		}
		var in inspectView
		decodeJSON(t, as("inspect", s.ref, "-o", "json"), &in)
		if in.PodName != s.pod.Name {
			t.Errorf("%s inspect %s: pod %q, want %q (not %q)", s.who, s.ref, in.PodName, s.pod.Name, s.othr.Name)
		}
		if out := as("logs", s.ref, "--tail", "-1").stdout; !strings.Contains(out, firstLine(s.pod)) || strings.Contains(out, firstLine(s.othr)) {
			t.Errorf("%s logs %s printed %q, want the log of %s", s.who, s.ref, out, s.pod.Name)
		}
		ex := as("exec", s.ref, "-v=6", "--", "echo", "hi")
		if ex.stdout != "hi\n" || !strings.Contains(ex.stderr, "/pods/"+s.pod.Name+"/exec") || strings.Contains(ex.stderr, "/pods/"+s.othr.Name+"/") {
			t.Errorf("%s exec %s: stdout %q; want it run in %s (requests:\n%s)", s.who, s.ref, ex.stdout, s.pod.Name, ex.stderr)
		}
	}
	if got := e.recordOf(web).State; got != "running" {
		t.Errorf("%s is %q, want running", web, got)
	}
	if _, ok := e.records()[job]; ok {
		t.Errorf("my database has a record of the colleague's %s", job)
	}

	// The Service selects the deployment's pod alone, and its endpoints are that pod.
	svc, err := client(t).CoreV1().Services(e.ns).Get(t.Context(), "web-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
	pods, err := client(t).CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != depPod.Name {
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		t.Errorf("service selector %s selects %v, want only %s", sel, names, depPod.Name)
	}
	waitFor(t, waitTimeout, func() (bool, error) {
		eps, err := client(t).DiscoveryV1().EndpointSlices(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web-svc"})
		if err != nil {
			return false, err
		}
		var targets []string
		for _, s := range eps.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil {
					targets = append(targets, ep.TargetRef.Name)
				}
			}
		}
		if !slices.Equal(targets, []string{depPod.Name}) {
			return false, fmt.Errorf("endpoints of web-svc: %v, want only %s", targets, depPod.Name)
		}
		return true, nil
	})
}

// TestRecordInterrupt (issue 12, case 8): Ctrl-C (SIGINT) during a wait says it was interrupted,
// never that it timed out, and exits 130; a start that waits for the previous job of its name
// to go is interrupted the same way and puts the record back, or gives up after a bound naming
// what holds the job; and a second Ctrl-C ends a slow shutdown at once.
func TestRecordInterrupt(t *testing.T) {
	requireCluster(t)
	t.Parallel()

	t.Run("wait", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, uid := e.heldJob("held")
		p := e.start("wait", id, "--for=exited", "--timeout=10m")
		e.waitLeasedBy(id, p.pid()) // waiting: its monitor holds the ID
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		r := p.wait(runTimeout)
		requireExit(t, "wait after SIGINT", r, 130)
		if want := fmt.Sprintf("error: interrupted while waiting for exited: %s (running)\n", id); r.stderr != want {
			t.Errorf("stderr %q, want %q", r.stderr, want)
		}
		e.checkRecord(id, "running", uid)
		if o, ok, err := e.leaseHolder(id); err != nil || (ok && o.PID == p.pid()) {
			t.Errorf("the interrupted wait left its lease of %s: %+v, %v", id, o, err)
		}
	})

	t.Run("stop --wait", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, uid := e.heldJob("held")
		addJobFinalizer(t, e.ns, "held")
		p := e.start("stop", id, "--wait", "--timeout=10m")
		// The confirmation is printed once the stop is done, before the wait.
		waitFor(t, waitTimeout, func() (bool, error) {
			if p.exited() {
				t.Fatalf("stop --wait ended while the job was held:\n%s", p.result())
			}
			if !strings.Contains(p.stdout.String(), "job.batch/held stopped (") {
				return false, fmt.Errorf("stdout %q", p.stdout.String())
			}
			return true, nil
		})
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		r := p.wait(runTimeout)
		requireExit(t, "stop --wait after SIGINT", r, 130)
		if want := fmt.Sprintf("error: interrupted while waiting for exited: %s (stopping)\n", id); r.stderr != want {
			t.Errorf("stderr %q, want %q", r.stderr, want)
		}
		// The truth: the job is still being deleted.
		e.checkRecord(id, "stopping", uid)
		removeJobFinalizer(t, e.ns, "held")
		waitJobGone(t, e.ns, "held", uid)
		if got := lastLine(e.runOK("recover", "--once").stdout); got != "reattached 1, changed 1, now terminal 1" {
			t.Errorf("recover --once: %q, want the stop completed", got)
		}
		if w := e.checkRecord(id, "exited", uid); w.Message != "stopped" {
			t.Errorf("message %q, want \"stopped\"", w.Message)
		}
	})

	t.Run("start waiting for the previous job", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, uid := e.finishedJob("done")
		addJobFinalizer(t, e.ns, "done")
		p := e.start("start", id, "--wait", "--timeout=10m")
		e.waitStates(waitTimeout, map[string]string{id: "starting"})
		waitJobTerminating(t, e.ns, "done") // asked for the finished job's deletion; waiting for it
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		r := p.wait(runTimeout)
		requireExit(t, "start after SIGINT", r, 130)
		if !strings.Contains(r.stderr, id) || strings.Contains(r.stderr, "timed out") || strings.Contains(r.stderr, "still being deleted") {
			t.Errorf("stderr %q, want the interrupted start of %s, not a timeout", r.stderr, id)
		}
		// The request is compensated: back to exited, the old job still there, nothing new.
		e.checkRecord(id, "exited", uid)
		if evs := e.events(id); evs[len(evs)-1].Type != "RequestFailed" {
			t.Errorf("the history ends with %v, want RequestFailed; history:\n%s", typesOf(evs), formatEvents(evs))
		}
		if j, err := getJob(t, e.ns, "done"); err != nil || string(j.UID) != uid {
			t.Errorf("after the interrupted start: %v, %+v; want the old job %s", err, j, uid)
		}
	})

	t.Run("start gives up on a job that does not go", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, uid := e.finishedJob("done")
		addJobFinalizer(t, e.ns, "done")
		// The bound is the plugin's own (runtime.JobGoneTimeout, a minute), not --timeout.
		r := runWith(t, runOpts{env: e.env, timeout: runTimeout + time.Minute}, "start", "-n", e.ns, id, "--wait", "--timeout=10m")
		requireExit(t, "start of a finished job held by a finalizer", r, 1)
		for _, want := range []string{id, "still being deleted", holdFinalizer} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr does not say %q: %q", want, r.stderr)
			}
		}
		w := e.checkRecord(id, "exited", uid)
		if !strings.Contains(w.Message, "still being deleted") {
			t.Errorf("record message %q, want the reason of the failed start", w.Message)
		}
		if evs := e.events(id); evs[len(evs)-1].Type != "RequestFailed" {
			t.Errorf("the history ends with %v, want RequestFailed; history:\n%s", typesOf(evs), formatEvents(evs))
		}
		// Once nothing holds it the start works.
		removeJobFinalizer(t, e.ns, "done")
		waitJobGone(t, e.ns, "done", uid)
		r = e.run("start", id, "--wait", "--timeout=10m")
		requireExit(t, "start once the old job is gone", r, 0)
		j, err := getJob(t, e.ns, "done")
		if err != nil || string(j.UID) == uid {
			t.Fatalf("after the start: %v, %+v; want a new job", err, j)
		}
		if w := e.recordOf(id); w.UID != string(j.UID) || (w.State != "running" && w.State != "exited") {
			t.Errorf("record %+v, want the new job %s running or exited", w, j.UID)
		}
	})

	t.Run("twice during a slow shutdown", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id, uid := e.finishedJob("done")
		addJobFinalizer(t, e.ns, "done")
		p := e.start("start", id)
		e.waitStates(waitTimeout, map[string]string{id: "starting"})
		waitJobTerminating(t, e.ns, "done")
		// The first SIGINT makes the start record its RequestFailed, which waits for our lock
		// (busy timeout, then retries): a shutdown that takes its time. Another SIGINT must end
		// it at once. SIGINTs are sent until it exits: a second one sent before the first is
		// handled would merge with it.
		unlock := e.lockDB()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(runTimeout)
	signals:
		for {
			if err := p.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Fatal(err)
			}
			select {
			case <-p.done:
				break signals
			case <-deadline:
				t.Fatalf("start still running %s after the first SIGINT with the database locked:\n%s", runTimeout, p.result())
			case <-tick.C:
			}
		}
		r := p.result()
		unlock()
		if r.code != 130 || !strings.Contains(r.stderr, "interrupted twice") {
			t.Errorf("start interrupted twice: exit code %d, stderr %q; want 130 and \"interrupted twice\"", r.code, r.stderr)
		}
		// It ended as a crash would: the intent stands, and recover makes it the truth.
		e.checkRecord(id, "starting", "")
		removeJobFinalizer(t, e.ns, "done")
		waitJobGone(t, e.ns, "done", uid)
		if got := lastLine(e.runOK("recover", "--once").stdout); got != "reattached 1, changed 1, now terminal 1" {
			t.Errorf("recover --once: %q, want the started record found gone", got)
		}
		e.checkRecord(id, "deleted", "")
	})
}

// walkSeed is the seed of the random walk: $GOBRAVE_E2E_SEED, else the clock. It is logged.
func walkSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, s, err)
		}
		seed = v
	}
	t.Logf("random walk seed %d (run the same verbs again with %s=%d)", seed, envSeed, seed)
	return seed
}

// walkOp is one command of the random walk and what came of it.
type walkOp struct {
	worker, step int
	verb, id     string
	labels       []string // of a create
	args         []string
	r            result
	err          error
	began, ended time.Time
}

func (o walkOp) String() string {
	out := fmt.Sprintf("w%d#%02d %s +%s kubectl gobrave %s -> exit %d", o.worker, o.step,
		o.began.Format("15:04:05.000"), o.ended.Sub(o.began).Round(time.Millisecond), strings.Join(o.args, " "), o.r.code)
	if o.err != nil {
		out += fmt.Sprintf(" (%v)", o.err)
	}
	if s := strings.TrimSpace(o.r.stderr); s != "" {
		out += " " + s
	}
	return out
}

// walkVerbs are the verbs of the walk with their weights.
var walkVerbs = []struct {
	verb   string
	weight int
}{{"create", 5}, {"start", 3}, {"stop", 3}, {"pause", 1}, {"resume", 1}, {"delete", 2}}

// walkJobLabels are the jobs of the walk: held until stopped, completing, failing.
var walkJobLabels = [][]string{
	{labelHold + "=true"},
	{labelRunFor + "=3s"},
	{labelRunFor + "=2s", labelExitCode + "=3"},
}

// nextOp draws a command: a verb on one of the names, of the name's main kind four times in
// five, else of the other kind; a quarter of the lifecycle verbs wait (--wait, 30 s).
func (e *monEnv) nextOp(rng *rand.Rand, names []string, mainKind map[string]string) walkOp {
	total := 0
	for _, v := range walkVerbs {
		total += v.weight
	}
	n := rng.IntN(total)
	var verb string
	for _, v := range walkVerbs {
		if n < v.weight {
			verb = v.verb
			break
		}
		n -= v.weight
	}
	name := names[rng.IntN(len(names))]
	kind := mainKind[name]
	if rng.IntN(5) == 0 {
		kind = otherKind(kind)
	}
	op := walkOp{verb: verb, id: e.id(kind, name)}
	if verb == "create" {
		op.args = []string{"create", name, "-n", e.ns, "--kind", kind, "--image", monImage}
		if kind == runtimeid.KindJob {
			op.labels = walkJobLabels[rng.IntN(len(walkJobLabels))]
		}
		for _, l := range op.labels {
			op.args = append(op.args, "--label", l)
		}
		return op
	}
	op.args = []string{verb, "-n", e.ns, op.id}
	if rng.IntN(4) == 0 {
		op.args = append(op.args, "--wait", "--timeout=30s")
	}
	return op
}

func otherKind(kind string) string {
	if kind == runtimeid.KindJob {
		return runtimeid.KindDeployment
	}
	return runtimeid.KindJob
}

// checkOp checks what a command of the walk printed, whatever the interleaving: it ran and
// ended in time, with 0, 1 or 2 (2 only for a refused create), one error line on failure, the
// confirmation on success, no panic and no locked database.
func checkOp(o walkOp) []string {
	var bad []string
	if o.err != nil {
		return []string{o.err.Error()}
	}
	r := o.r
	switch {
	case r.code == 2 && o.verb != "create":
		bad = append(bad, "exit code 2 (invalid input) for a well-formed "+o.verb)
	case r.code != 0 && r.code != 1 && r.code != 2:
		bad = append(bad, fmt.Sprintf("exit code %d", r.code))
	}
	for _, s := range []string{"panic", "goroutine ", "database is locked", "SQLITE_BUSY"} {
		if strings.Contains(r.stderr, s) {
			bad = append(bad, fmt.Sprintf("stderr says %q", s))
		}
	}
	if r.code != 0 && (!strings.HasPrefix(r.stderr, "error: ") || strings.Count(r.stderr, "\n") != 1) {
		bad = append(bad, fmt.Sprintf("stderr %q is not one error line", r.stderr))
	}
	if r.code == 0 {
		id, _ := runtimeid.Parse(o.id)
		want := o.id + "\n"
		if o.verb != "create" {
			want = fmt.Sprintf("%s/%s %s (%s)\n", resourceOf[id.Kind], id.Name, pastOf[o.verb], o.id)
		}
		if r.stdout != want {
			bad = append(bad, fmt.Sprintf("stdout %q, want %q", r.stdout, want))
		}
	}
	return bad
}

// TestRecordRandomWalk: two plugin processes at a time issue random create, start, stop, pause,
// resume and delete commands on four names of both kinds while `monitor --all --follow` runs.
// Then the monitor is stopped, the cluster settles, one `recover --once` runs, and the record
// must be the truth:
//   - every record's state is what its object says: a deployment with its replica ready is
//     running, scaled to 0 exited; a job Complete exited, Failed failed, running running; no
//     object deleted, or exited when the last request was a stop or pause of a job (failed for a
//     job made to fail); nothing is left created, starting or stopping;
//   - every object of the namespace has a record of its kind with its UID;
//   - no observed event is recorded twice for one object and type between two requests;
//   - the monitor printed only recorded events, and doctor passes.
//
// The seed is logged; GOBRAVE_E2E_SEED replays the same commands (their interleaving is the
// machine's).
func TestRecordRandomWalk(t *testing.T) {
	requireCluster(t)
	t.Parallel()
	const workers, steps = 2, 40
	names := []string{"a", "b", "c", "d"}
	seed := walkSeed(t)
	mainKind := map[string]string{}
	kinds := rand.New(rand.NewPCG(seed, workers))
	for _, n := range names {
		mainKind[n] = runtimeid.KindDeployment
		if kinds.IntN(2) == 1 {
			mainKind[n] = runtimeid.KindJob
		}
	}
	t.Logf("main kinds %v", mainKind)
	e := newMonEnv(t)
	anchor := e.create(monDeployment("anchor"))[0]
	mon := e.start("monitor", "--all", "--follow", "-o", "json")
	e.waitLeasedBy(anchor, mon.pid())

	var (
		mu  sync.Mutex
		ops []walkOp
		wg  sync.WaitGroup
	)
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for s := range steps {
				op := e.nextOp(rng, names, mainKind)
				op.worker, op.step, op.began = w, s, time.Now()
				op.r, op.err = monExec(t.Context(), e.env, runTimeout, "kubectl", append([]string{"gobrave"}, op.args...)...)
				op.ended = time.Now()
				mu.Lock()
				ops = append(ops, op)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(ops, func(a, b walkOp) int { return a.began.Compare(b.began) })
	defer func() {
		if t.Failed() {
			var b strings.Builder
			for _, o := range ops {
				b.WriteString("  " + o.String() + "\n")
			}
			t.Logf("seed %d; the commands, in the order they began:\n%s", seed, b.String())
		}
	}()
	codes := map[int]int{}
	for _, o := range ops {
		codes[o.r.code]++
		for _, p := range checkOp(o) {
			t.Errorf("%s: %s", o, p)
		}
	}
	t.Logf("%d commands, exit codes %v", len(ops), codes)

	printed := mon.interrupt()
	waitSettled(t, e.ns, 3*time.Minute)
	r := e.run("recover", "--once")
	requireExit(t, "recover --once after the walk", r, 0)
	t.Logf("recover --once:\n%s", r.stdout)

	// The spec of each ID, from its last create that succeeded: is it a job made to fail?
	fails := map[string]bool{}
	for _, o := range ops {
		if o.verb == "create" && o.r.code == 0 {
			fails[o.id] = slices.Contains(o.labels, labelExitCode+"=3")
		}
	}
	objects := map[string]string{} // runtime ID -> UID of the object of that kind and name
	wantOf := map[string][]string{}
	c := client(t)
	deps, err := c.AppsV1().Deployments(e.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		id := e.id(runtimeid.KindDeployment, d.Name)
		objects[id] = string(d.UID)
		if *d.Spec.Replicas == 0 {
			wantOf[id] = []string{"exited"}
		} else {
			wantOf[id] = []string{"running"}
		}
	}
	jobs, err := c.BatchV1().Jobs(e.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		id := e.id(runtimeid.KindJob, j.Name)
		objects[id] = string(j.UID)
		switch jobFinished(j) {
		case "Complete":
			wantOf[id] = []string{"exited"}
		case "Failed":
			wantOf[id] = []string{"failed"}
		default:
			wantOf[id] = []string{"running"}
			if jobSuspended(j) {
				wantOf[id] = []string{"paused"}
			}
		}
	}

	ws := e.records()
	var ids []string
	for id := range ws {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	all := e.events(ids...)
	states := map[string]int{}
	for _, id := range ids {
		w := ws[id]
		states[w.State]++
		evs := e.events(id)
		last := lastRequest(evs)
		want, present := wantOf[id]
		if !present {
			want = []string{"deleted"}
			if w.Kind == runtimeid.KindJob && (last == "StopRequested" || last == "PauseRequested") {
				// A pause of a job being deleted by a stop is refused
				// (RequestFailed): the stop stands. One that was not
				// refused kept the job, so its absence is a deletion.
				want = []string{"exited"}
				if last == "PauseRequested" {
					want = append(want, "deleted")
				}
				if fails[id] {
					want = append(want, "failed")
				}
			}
		}
		if !slices.Contains(want, w.State) {
			where := "no object in the cluster"
			if present {
				where = "object " + objects[id]
			}
			t.Errorf("%s: recorded %q (%q), want %v (%s, last request %s); history:\n%s", id, w.State, w.Message, want, where, last, formatEvents(evs))
		}
		if present && w.UID != objects[id] {
			t.Errorf("%s: record about object %q, the cluster's is %s; history:\n%s", id, w.UID, objects[id], formatEvents(evs))
		}
		if dup := observedTwice(evs); len(dup) > 0 {
			t.Errorf("%s: observed events recorded twice in one epoch:\n  %s\nhistory:\n%s", id, strings.Join(dup, "\n  "), formatEvents(evs))
		}
	}
	for id, uid := range objects {
		if w, ok := ws[id]; !ok || w.State == "deleted" {
			t.Errorf("object %s (%s) in the cluster has no live record: %+v", id, uid, w)
		}
	}
	t.Logf("%d records: %v", len(ids), states)
	checkPrintedRecorded(t, printed.stdout, all)
	// t.TempDir is world-readable, which doctor rightly reports: make it private first.
	if err := os.Chmod(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if r := e.run("doctor"); r.code != 0 {
		t.Errorf("doctor after the walk: %s", r)
	}
}
