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
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// resourceOf is kubectl's resource.group of a kind, as the plugin's confirmations print it.
var resourceOf = map[string]string{runtimeid.KindDeployment: "deployment.apps", runtimeid.KindJob: "job.batch"}

// pastOf is what a verb's confirmation says it did.
var pastOf = map[string]string{"start": "started", "stop": "stopped", "pause": "paused", "resume": "resumed", "delete": "deleted"}

// requestOf is the requested event a verb records.
var requestOf = map[string]string{"start": "StartRequested", "stop": "StopRequested", "pause": "PauseRequested", "resume": "ResumeRequested", "delete": "DeleteRequested"}

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

func getJob(t testing.TB, ns, name string) (*batchv1.Job, error) {
	return client(t).BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
}

func jobRunning(j *batchv1.Job) bool { return j.Status.Ready != nil && *j.Status.Ready > 0 }

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
			for _, verb := range []string{"stop", "stop", "pause", "pause"} {
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
