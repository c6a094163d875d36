package e2e

// End-to-end tests of the verbs that watch workloads — monitor, recover, wait — on the real control
// plane. Every test has a namespace and a state database (GOBRAVE_HOME) of its own: monitor --all
// and recover act on every non-terminal record of the database, so a shared one would make their
// counts depend on what the other tests left behind. The database is always read through the
// plugin (`ps -a -o json`, `events -o json`), except in TestRequestCount, which fills it with
// pkg/store directly.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// monImage is the image of every workload here; kwok never pulls it.
const monImage = "registry.invalid/gobrave-e2e:1"

// monEnv is the plugin bound to one test: its namespace and a state database of its own.
type monEnv struct {
	t    *testing.T
	ns   string
	home string   // GOBRAVE_HOME: the database is home/state.db
	env  []string // over the suite's environment
}

func newMonEnv(t *testing.T) *monEnv {
	t.Helper()
	ns := newNamespace(t)
	home := t.TempDir()
	return &monEnv{t: t, ns: ns, home: home, env: []string{"GOBRAVE_HOME=" + home}}
}

// argv puts -n NS right after the verb, so that a command after "--" stays last.
func (e *monEnv) argv(args []string) []string {
	if len(args) == 0 {
		return []string{"-n", e.ns}
	}
	return append([]string{args[0], "-n", e.ns}, args[1:]...)
}

// run is `kubectl gobrave VERB -n NS ARGS...` with this test's database.
func (e *monEnv) run(args ...string) result {
	e.t.Helper()
	return runWith(e.t, runOpts{env: e.env}, e.argv(args)...)
}

func (e *monEnv) runOK(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("kubectl gobrave %s: %s", strings.Join(e.argv(args), " "), r)
	}
	return r
}

// monWorkload and monEvent are the stable JSON forms of `ps -o json` and `events -o json`.
type monWorkload struct {
	RuntimeID string `json:"runtimeID"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	State     string `json:"state"`
	Message   string `json:"message"`
	Reason    string `json:"reason"`
	ExitCode  *int32 `json:"exitCode"`
}

type monEvent struct {
	RuntimeID string    `json:"runtimeID"`
	Type      string    `json:"type"`
	Message   string    `json:"message"`
	UID       string    `json:"uid"`
	Time      time.Time `json:"time"`
	Reason    string    `json:"reason"`
	ExitCode  *int32    `json:"exitCode"`
}

func (ev monEvent) String() string {
	return fmt.Sprintf("%s %s %q uid=%s at %s", ev.RuntimeID, ev.Type, ev.Message, ev.UID, ev.Time.Format(time.RFC3339Nano))
}

// observed reports whether the monitor (not a verb) records events of this type.
func (ev monEvent) observed() bool { return strings.HasPrefix(ev.Type, "Container") }

// records returns every record of the namespace by runtime ID (`ps -a -o json`).
func (e *monEnv) records() map[string]monWorkload {
	e.t.Helper()
	ws, err := e.tryRecords()
	if err != nil {
		e.t.Fatal(err)
	}
	return ws
}

func (e *monEnv) tryRecords() (map[string]monWorkload, error) {
	r := e.run("ps", "-a", "-o", "json")
	if r.code != 0 {
		return nil, fmt.Errorf("ps -a -o json: %s", r)
	}
	var list []monWorkload
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		return nil, fmt.Errorf("ps -a -o json: %v\n%s", err, r.stdout)
	}
	out := make(map[string]monWorkload, len(list))
	for _, w := range list {
		out[w.RuntimeID] = w
	}
	return out, nil
}

// events returns the recorded history of ids, oldest first (`events -o json`).
func (e *monEnv) events(ids ...string) []monEvent {
	e.t.Helper()
	r := e.runOK(append([]string{"events", "-o", "json"}, ids...)...)
	var evs []monEvent
	if err := json.Unmarshal([]byte(r.stdout), &evs); err != nil {
		e.t.Fatalf("events -o json: %v\n%s", err, r.stdout)
	}
	return evs
}

// waitStates waits until every ID in want has that state in the database.
func (e *monEnv) waitStates(timeout time.Duration, want map[string]string) {
	e.t.Helper()
	waitFor(e.t, timeout, func() (bool, error) {
		ws, err := e.tryRecords()
		if err != nil {
			return false, err
		}
		var wrong []string
		for id, st := range want {
			if got := ws[id].State; got != st {
				wrong = append(wrong, fmt.Sprintf("%s is %q, want %q", id, got, st))
			}
		}
		if len(wrong) > 0 {
			slices.Sort(wrong)
			return false, errors.New(strings.Join(wrong, "; "))
		}
		return true, nil
	})
}

// checkStates checks, now, that every ID in want has that state in the database.
func (e *monEnv) checkStates(want map[string]string) {
	e.t.Helper()
	ws := e.records()
	for id, st := range want {
		if got := ws[id].State; got != st {
			e.t.Errorf("%s is %q, want %q", id, got, st)
		}
	}
	if e.t.Failed() {
		e.t.FailNow()
	}
}

// monSpec is one workload to create with the plugin.
type monSpec struct {
	name   string
	kind   string // runtimeid.KindDeployment or runtimeid.KindJob
	labels []string
}

func monJob(name string, labels ...string) monSpec {
	return monSpec{name: name, kind: runtimeid.KindJob, labels: labels}
}

func monDeployment(name string, labels ...string) monSpec {
	return monSpec{name: name, kind: runtimeid.KindDeployment, labels: labels}
}

// create creates the workloads with `kubectl gobrave create`, four at a time, and returns their
// runtime IDs in order.
func (e *monEnv) create(specs ...monSpec) []string {
	e.t.Helper()
	ids := make([]string, len(specs))
	errs := make([]error, len(specs))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, s := range specs {
		args := []string{"gobrave", "create", "-n", e.ns, s.name, "--image", monImage, "--kind", s.kind}
		for _, l := range s.labels {
			args = append(args, "--label", l)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := monExec(e.t.Context(), e.env, runTimeout, "kubectl", args...)
			switch {
			case err != nil:
				errs[i] = err
			case r.code != 0:
				errs[i] = fmt.Errorf("kubectl %s: %s", strings.Join(args, " "), r)
			default:
				ids[i] = strings.TrimSpace(r.stdout)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	for i, s := range specs {
		if want := fmt.Sprintf("k8s-%s|%s|%s", e.ns, s.kind, s.name); ids[i] != want {
			e.t.Fatalf("create %s printed %q, want the runtime ID %q", s.name, ids[i], want)
		}
	}
	return ids
}

// monExec runs a command like execute does (the suite's environment plus env), without touching
// t, so that it may run in any goroutine.
func monExec(ctx context.Context, env []string, timeout time.Duration, name string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("%s %s: no exit within %s: %v\n%s", name, strings.Join(args, " "), timeout, err, r)
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		return r, fmt.Errorf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return r, nil
}

// monBuffer is a bytes.Buffer safe to read while the process writes it.
type monBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *monBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *monBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// monProc is a plugin command running in the background, like a monitor in a terminal. kubectl
// exec()s the plugin, so the process is the plugin itself and signals reach it directly.
type monProc struct {
	t      *testing.T
	args   []string
	cmd    *exec.Cmd
	stdout monBuffer
	stderr monBuffer
	done   chan struct{}
	code   int // after done; -1 when killed by a signal
}

// start starts `kubectl gobrave VERB -n NS ARGS...` with this test's database. The process is
// killed at the end of the test if it is still running.
func (e *monEnv) start(args ...string) *monProc {
	e.t.Helper()
	p := &monProc{t: e.t, args: e.argv(args), done: make(chan struct{})}
	p.cmd = exec.Command("kubectl", append([]string{"gobrave"}, p.args...)...)
	p.cmd.Env = append(os.Environ(), e.env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		e.t.Fatalf("start kubectl gobrave %s: %v", strings.Join(p.args, " "), err)
	}
	go func() {
		err := p.cmd.Wait()
		var exitErr *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exitErr):
			p.code = exitErr.ExitCode()
		default:
			p.code = -1
		}
		close(p.done)
	}()
	e.t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *monProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *monProc) result() result {
	return result{stdout: p.stdout.String(), stderr: p.stderr.String(), code: p.code}
}

// wait waits for the process to exit by itself and fails the test after timeout.
func (p *monProc) wait(timeout time.Duration) result {
	p.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.result()
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("kubectl gobrave %s: no exit within %s\nstdout:\n%s\nstderr:\n%s",
			strings.Join(p.args, " "), timeout, p.stdout.String(), p.stderr.String())
	}
	return result{}
}

// printedEvent is one event a monitor printed: a text line "TIME  ID  TYPE  MESSAGE" or a JSON line.
type printedEvent struct {
	monEvent
	line string
}

// parsePrinted parses a monitor's stdout, failing the test on any line that is not an event.
func parsePrinted(t *testing.T, stdout string, jsonLines bool) []printedEvent {
	t.Helper()
	var out []printedEvent
	for _, line := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		if line == "" {
			continue
		}
		var ev monEvent
		if jsonLines {
			var obj map[string]any
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Fatalf("monitor -o json printed a line that is not a JSON object: %q: %v", line, err)
			}
			for _, k := range []string{"runtimeID", "type", "message", "uid", "time"} {
				if _, ok := obj[k]; !ok {
					t.Errorf("monitor -o json line has no %q: %s", k, line)
				}
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("monitor -o json line %q: %v", line, err)
			}
			if ev.UID == "" || ev.Time.IsZero() {
				t.Errorf("monitor -o json line without uid or time: %s", line)
			}
		} else {
			f := strings.SplitN(line, "  ", 4)
			if len(f) != 4 {
				t.Fatalf("monitor printed %q, want TIME  RUNTIME-ID  TYPE  MESSAGE", line)
			}
			tm, err := time.Parse(time.RFC3339, f[0])
			if err != nil {
				t.Fatalf("monitor line %q: time: %v", line, err)
			}
			ev = monEvent{Time: tm, RuntimeID: f[1], Type: f[2], Message: f[3]}
		}
		out = append(out, printedEvent{monEvent: ev, line: line})
	}
	return out
}

// checkPrinted checks that a monitor printed exactly the observed events recorded for ids, each
// once: the same runtime ID, type and message, and with JSON lines the same UID and time.
func checkPrinted(t *testing.T, printed []printedEvent, recorded []monEvent, jsonLines bool) {
	t.Helper()
	key := func(ev monEvent) string {
		k := ev.RuntimeID + " " + ev.Type + " " + ev.Message
		if jsonLines {
			k += " " + ev.UID + " " + ev.Time.UTC().Format(time.RFC3339Nano)
		}
		return k
	}
	want := map[string]int{}
	for _, ev := range recorded {
		if ev.observed() {
			want[key(ev)]++
		}
	}
	got := map[string]int{}
	for _, p := range printed {
		got[key(p.monEvent)]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("recorded event %q printed %d times, want %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("printed %d time(s) an event not recorded in the database: %q", n, k)
		}
	}
}

// countTypes counts the events of each runtime ID by type.
func countTypes(evs []monEvent) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, ev := range evs {
		if out[ev.RuntimeID] == nil {
			out[ev.RuntimeID] = map[string]int{}
		}
		out[ev.RuntimeID][ev.Type]++
	}
	return out
}

func formatEvents(evs []monEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString("  " + ev.String() + "\n")
	}
	return b.String()
}

// TestMonitorUntilTerminal runs `monitor ID...` in the foreground over deployments that become
// ready and are then scaled to zero with kubectl, jobs that complete or fail, and a held job and a
// deployment deleted with kubectl while monitored: it prints one line (or JSON line) per recorded event and
// exits 0 by itself once every ID is terminal.
func TestMonitorUntilTerminal(t *testing.T) {
	requireCluster(t)
	for _, output := range []string{"text", "json"} {
		t.Run(output, func(t *testing.T) {
			t.Parallel()
			jsonLines := output == "json"
			e := newMonEnv(t)
			ids := e.create(
				monDeployment("web"),
				monDeployment("api"),
				monJob("ok", labelRunFor+"=3s"),
				monJob("bad", labelRunFor+"=3s", labelExitCode+"=3"),
				monJob("held", labelHold+"=true"),
				monDeployment("gone"),
			)
			web, api, ok, bad, held, gone := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]

			args := append([]string{"monitor"}, ids...)
			if jsonLines {
				args = append(args, "-o", "json")
			}
			mon := e.start(args...)

			// Only the monitor writes observed states: running means it saw them.
			e.waitStates(waitTimeout, map[string]string{web: "running", api: "running", held: "running", gone: "running"})
			recs := e.records()
			uids := map[string]string{held: recs[held].UID, gone: recs[gone].UID}
			if r := kubectl(t, "scale", "-n", e.ns, "deployment/web", "deployment/api", "--replicas=0"); r.code != 0 {
				t.Fatalf("kubectl scale: %s", r)
			}
			for _, obj := range []string{"job/held", "deployment/gone"} {
				if r := kubectl(t, "delete", "-n", e.ns, obj); r.code != 0 {
					t.Fatalf("kubectl delete %s: %s", obj, r)
				}
			}

			r := mon.wait(runTimeout)
			if r.code != 0 {
				t.Fatalf("monitor exited with %d, want 0 once every ID is terminal:\n%s", r.code, r)
			}

			ws := e.records()
			want := map[string]struct{ state, message string }{
				web:  {"exited", "0"},
				api:  {"exited", "0"},
				ok:   {"exited", "0"},
				bad:  {"failed", ""}, // message checked below
				held: {"deleted", ""},
				gone: {"deleted", ""},
			}
			for id, w := range want {
				got := ws[id]
				if got.State != w.state || (w.message != "" && got.Message != w.message) {
					t.Errorf("%s: state %q message %q, want %q %q", id, got.State, got.Message, w.state, w.message)
				}
			}
			if m := ws[bad].Message; m == "" || m == "0" {
				t.Errorf("%s failed with message %q, want the job's failure reason", bad, m)
			}

			evs := e.events(ids...)
			counts := countTypes(evs)
			for _, id := range []string{web, api} {
				if counts[id]["ContainerStarted"] != 1 || counts[id]["ContainerExited"] != 1 {
					t.Errorf("%s: want one ContainerStarted and one ContainerExited, history:\n%s", id, formatEvents(evs))
				}
			}
			if counts[ok]["ContainerExited"] != 1 || counts[bad]["ContainerFailed"] != 1 {
				t.Errorf("want one ContainerExited for %s and one ContainerFailed for %s, history:\n%s", ok, bad, formatEvents(evs))
			}
			for _, id := range []string{held, gone} {
				deleted := 0
				for _, ev := range evs {
					if ev.RuntimeID == id && ev.Type == "ContainerDeleted" {
						deleted++
						if ev.UID != uids[id] {
							t.Errorf("ContainerDeleted of %s is about uid %q, want the object's %q", id, ev.UID, uids[id])
						}
					}
				}
				if deleted != 1 {
					t.Errorf("%d ContainerDeleted recorded for %s deleted while monitored, want 1; history:\n%s", deleted, id, formatEvents(evs))
				}
			}

			printed := parsePrinted(t, r.stdout, jsonLines)
			checkPrinted(t, printed, evs, jsonLines)
			t.Logf("monitor printed %d events:\n%s", len(printed), r.stdout)
		})
	}
}

// TestMonitorFollowSignal: `monitor --all --follow` keeps running after every ID is terminal, and
// SIGTERM ends it with exit code 0, everything it printed being recorded.
func TestMonitorFollowSignal(t *testing.T) {
	e := newMonEnv(t)
	ids := e.create(monJob("done"), monJob("broken", labelExitCode+"=5"))
	done, broken := ids[0], ids[1]

	mon := e.start("monitor", "--all", "--follow", "-o", "json")
	e.waitStates(waitTimeout, map[string]string{done: "exited", broken: "failed"})
	// Both events printed: the monitor has seen everything there is to see.
	waitFor(t, waitTimeout, func() (bool, error) {
		if n := strings.Count(mon.stdout.String(), "\n"); n < 2 {
			return false, fmt.Errorf("%d lines printed", n)
		}
		return true, nil
	})
	holdsFor(t, 3*time.Second, func() error {
		if mon.exited() {
			return fmt.Errorf("monitor --follow exited after every ID became terminal:\n%s", mon.result())
		}
		return nil
	})

	if err := mon.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := mon.wait(30 * time.Second)
	if r.code != 0 {
		t.Fatalf("monitor --follow exited with %d after SIGTERM, want 0:\n%s", r.code, r)
	}

	evs := e.events(ids...)
	printed := parsePrinted(t, r.stdout, true)
	checkPrinted(t, printed, evs, true)
	counts := countTypes(evs)
	if counts[done]["ContainerExited"] != 1 || counts[broken]["ContainerFailed"] != 1 {
		t.Errorf("want one ContainerExited for %s and one ContainerFailed for %s, history:\n%s", done, broken, formatEvents(evs))
	}
}

// TestRecoverOnce changes the cluster while nothing monitors it — jobs and deployments deleted
// with kubectl, jobs completing — and checks that `recover --once` records every change, prints
// the right summary and leaves the untouched workloads running; a second pass changes nothing.
func TestRecoverOnce(t *testing.T) {
	e := newMonEnv(t)
	c := client(t)
	running := e.create(
		monJob("held-del-1", labelHold+"=true"),
		monJob("held-del-2", labelHold+"=true"),
		monJob("held-keep-1", labelHold+"=true"),
		monJob("held-keep-2", labelHold+"=true"),
		monDeployment("web-del-1"),
		monDeployment("web-del-2"),
		monDeployment("web-keep-1"),
		monDeployment("web-keep-2"),
	)
	// Record them running; wait's monitor ends with it.
	e.runOK(append([]string{"wait", "--for=started", "--timeout=2m"}, running...)...)
	want := map[string]string{}
	for _, id := range running {
		want[id] = "running"
	}
	e.checkStates(want)

	// Created while nothing monitors: recorded as created, then they complete.
	completing := e.create(monJob("done-1", labelRunFor+"=2s"), monJob("done-2", labelRunFor+"=2s"))
	for _, id := range completing {
		want[id] = "created"
	}
	e.checkStates(want)
	evsBefore := e.events(append(slices.Clone(running), completing...)...)

	// Behind the plugin's back.
	for _, args := range [][]string{
		{"delete", "-n", e.ns, "job", "held-del-1", "held-del-2"},
		{"delete", "-n", e.ns, "deployment", "web-del-1", "web-del-2"},
	} {
		if r := kubectl(t, args...); r.code != 0 {
			t.Fatalf("kubectl %s: %s", strings.Join(args, " "), r)
		}
	}
	for _, name := range []string{"done-1", "done-2"} {
		waitFor(t, waitTimeout, func() (bool, error) {
			j, err := c.BatchV1().Jobs(e.ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, fmt.Errorf("job %s conditions %v", name, j.Status.Conditions)
		})
	}
	// Nothing watched: the database still says what it said.
	e.checkStates(want)

	r := e.runOK("recover", "--once")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if got, wantSum := lines[len(lines)-1], "reattached 10, changed 6, now terminal 6"; got != wantSum {
		t.Errorf("recover --once summary %q, want %q\n%s", got, wantSum, r)
	}
	// The lines before the summary are the events it recorded.
	printed := parsePrinted(t, strings.Join(lines[:len(lines)-1], "\n"), false)
	if len(printed) != 6 {
		t.Errorf("recover --once printed %d events, want 6:\n%s", len(printed), r.stdout)
	}

	byName := func(id string) string { return id[strings.LastIndex(id, "|")+1:] }
	ws := e.records()
	for _, id := range append(slices.Clone(running), completing...) {
		name := byName(id)
		var st, msg string
		switch {
		case strings.Contains(name, "-del-"):
			st = "deleted"
		case strings.HasPrefix(name, "done-"):
			st, msg = "exited", "0"
		default:
			st = "running"
		}
		if got := ws[id]; got.State != st || (msg != "" && got.Message != msg) {
			t.Errorf("%s after recover --once: state %q message %q, want %q %q", id, got.State, got.Message, st, msg)
		}
	}
	evs := e.events(append(slices.Clone(running), completing...)...)
	newEvs := evs[len(evsBefore):]
	counts := countTypes(newEvs)
	for _, id := range append(slices.Clone(running), completing...) {
		name := byName(id)
		var wantType string
		switch {
		case strings.Contains(name, "-del-"):
			wantType = "ContainerDeleted"
		case strings.HasPrefix(name, "done-"):
			wantType = "ContainerExited"
		}
		n := 0
		for _, k := range counts[id] {
			n += k
		}
		switch {
		case wantType == "" && n != 0:
			t.Errorf("recover --once recorded %d events for the untouched %s", n, id)
		case wantType != "" && (n != 1 || counts[id][wantType] != 1):
			t.Errorf("recover --once recorded %v for %s, want one %s", counts[id], id, wantType)
		}
	}
	checkPrinted(t, printed, newEvs, false)
	t.Logf("recover --once:\n%s", r.stdout)

	r = e.runOK("recover", "--once")
	if got, wantSum := strings.TrimSpace(r.stdout), "reattached 4, changed 0, now terminal 0"; got != wantSum {
		t.Errorf("second recover --once printed %q, want only the summary %q\n%s", got, wantSum, r)
	}
	if after := e.events(append(slices.Clone(running), completing...)...); len(after) != len(evs) {
		t.Errorf("the second recover --once recorded %d events, want none:\n%s", len(after)-len(evs), formatEvents(after[len(evs):]))
	}
}

// TestMonitorTwoMonitors runs two monitors on the same ten jobs at once: each observation is
// recorded once, whichever monitor saw it first. (Named TestMonitor… so that -run TestMonitor
// selects it.)
func TestMonitorTwoMonitors(t *testing.T) {
	e := newMonEnv(t)
	var specs []monSpec
	for i := range 10 {
		specs = append(specs, monJob(fmt.Sprintf("job-%d", i), labelRunFor+"=3s"))
	}
	ids := e.create(specs...)

	args := append([]string{"monitor", "-o", "json"}, ids...)
	a, b := e.start(args...), e.start(args...)
	ra, rb := a.wait(runTimeout), b.wait(runTimeout)
	for i, r := range []result{ra, rb} {
		if r.code != 0 {
			t.Errorf("monitor %d exited with %d, want 0:\n%s", i+1, r.code, r)
		}
	}

	evs := e.events(ids...)
	counts := countTypes(evs)
	ws := e.records()
	for _, id := range ids {
		if n := counts[id]["ContainerExited"]; n != 1 {
			t.Errorf("%s has %d ContainerExited events, want exactly 1", id, n)
		}
		if n := counts[id]["ContainerStarted"]; n > 1 {
			t.Errorf("%s has %d ContainerStarted events, want at most 1", id, n)
		}
		if st := ws[id].State; st != "exited" {
			t.Errorf("%s is %q, want exited", id, st)
		}
	}
	if t.Failed() {
		t.Logf("history:\n%s", formatEvents(evs))
	}
	// Each monitor prints what it recorded and what it followed of the other's; neither may print
	// an event that is not in the database.
	for i, r := range []result{ra, rb} {
		printed := parsePrinted(t, r.stdout, true)
		for _, p := range printed {
			found := false
			for _, ev := range evs {
				found = found || (ev.RuntimeID == p.RuntimeID && ev.Type == p.Type && ev.UID == p.UID && ev.Time.Equal(p.Time))
			}
			if !found {
				t.Errorf("monitor %d printed an event not in the database: %s", i+1, p.line)
			}
		}
		t.Logf("monitor %d printed %d events", i+1, len(printed))
	}
}

// TestWaitMany: `wait` over many IDs under one --timeout.
func TestWaitMany(t *testing.T) {
	requireCluster(t)

	t.Run("all exited", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		var specs []monSpec
		for i := range 10 {
			specs = append(specs, monJob(fmt.Sprintf("job-%d", i), labelRunFor+"=1s"))
		}
		ids := e.create(specs...)
		r := e.run(append([]string{"wait", "--for=exited", "--timeout=2m"}, ids...)...)
		if r.code != 0 {
			t.Fatalf("wait --for=exited on 10 completing jobs: %s", r)
		}
		for i := range 10 {
			if line := fmt.Sprintf("job.batch/job-%d condition met (exited)", i); !strings.Contains(r.stdout, line) {
				t.Errorf("wait did not print %q:\n%s", line, r)
			}
		}
		ws := e.records()
		for _, id := range ids {
			if st := ws[id].State; st != "exited" {
				t.Errorf("%s is %q after wait, want exited", id, st)
			}
		}
	})

	t.Run("timeout names those that did not", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		ids := e.create(
			monJob("held-0", labelHold+"=true"),
			monJob("quick-0"),
			monJob("held-1", labelHold+"=true"),
			monJob("quick-1"),
			monJob("held-2", labelHold+"=true"),
		)
		held := []string{ids[0], ids[2], ids[4]}
		quick := []string{ids[1], ids[3]}
		e.runOK(append([]string{"wait", "--for=exited", "--timeout=2m"}, quick...)...)

		r := e.run(append([]string{"wait", "--for=exited", "--timeout=5s"}, ids...)...)
		if r.code != 1 {
			t.Fatalf("wait with three held jobs: exit code %d, want 1 on timeout:\n%s", r.code, r)
		}
		if !strings.Contains(r.stderr, "timed out") {
			t.Errorf("stderr does not say it timed out:\n%s", r)
		}
		for _, id := range held {
			if !strings.Contains(r.stderr, id) {
				t.Errorf("stderr does not name %s, which did not exit:\n%s", id, r)
			}
		}
		for _, id := range quick {
			if strings.Contains(r.stderr, id) {
				t.Errorf("stderr names %s, which exited:\n%s", id, r)
			}
		}
	})

	t.Run("started on a failed job fails at once", func(t *testing.T) {
		t.Parallel()
		e := newMonEnv(t)
		id := e.create(monJob("doomed", labelExitCode+"=7"))[0]
		// Failed in the cluster before wait looks, so that the monitor cannot see it running first
		// (which would meet --for=started).
		waitJobCondition(t, e.ns, "doomed", batchv1.JobFailed)
		r := e.run("wait", "--for=started", "--timeout=10m", id)
		if r.code == 0 {
			t.Fatalf("wait --for=started on a failed job succeeded:\n%s", r)
		}
		if r.code != 1 || !strings.Contains(r.stderr, id) || !strings.Contains(r.stderr, "failed") {
			t.Errorf("want exit code 1 and a message naming %s and failed:\n%s", id, r)
		}
		if st := e.records()[id].State; st != "failed" {
			t.Errorf("%s is %q, want failed", id, st)
		}
	})
}

// monResponseLine is the request line client-go logs at -v=6: `"Response" verb="GET" url="..."`.
var monResponseLine = regexp.MustCompile(`"Response" verb="([A-Z]+)" url="([^"]+)"`)

// TestRequestCount: `recover --once` makes a constant number of API requests, none about one
// object, counted by the API server (its audit log, requests made as a user of the command's
// own), over three loads: all running (100 deployments, 100 held jobs), half deleted while
// nothing watched (20 + 20, 10 + 10 deleted: their absence is confirmed by one metadata-only
// watch-list per kind, not a GET each), half failed (20 jobs, 10 failed with exit code 3: the exit codes come from
// the pods streamed, not a pod list per failed job).
func TestRequestCount(t *testing.T) {
	t.Run("all running", func(t *testing.T) {
		const perKind = 100
		e := newMonEnv(t)
		waitRoom(t, 2*perKind) // 200 pods must fit: wait for the pods of earlier tests' namespaces to go
		specs := make([]spec.ContainerSpec, 0, 2*perKind)
		for i := range perKind {
			specs = append(specs,
				spec.ContainerSpec{Name: fmt.Sprintf("svc-%03d", i), Image: monImage, WorkloadKind: runtimeid.KindDeployment},
				spec.ContainerSpec{Name: fmt.Sprintf("task-%03d", i), Image: monImage, WorkloadKind: runtimeid.KindJob,
					Labels: map[string]string{labelHold: "true"}})
		}
		ids := e.bulkCreate(specs)
		waitCounts(t, e.ns, perKind, perKind)
		e.countRecover(t, fmt.Sprintf("reattached %d, changed %d, now terminal 0", 2*perKind, 2*perKind),
			map[string]int{"watch deployments": 1, "watch jobs": 1, "watch pods": 1, "watch replicasets": 1})
		e.checkStates(statesOf(ids, "running"))
	})
	t.Run("half deleted while down", func(t *testing.T) {
		const perKind = 20
		e := newMonEnv(t)
		waitRoom(t, 2*perKind)
		specs := make([]spec.ContainerSpec, 0, 2*perKind)
		for i := range perKind {
			specs = append(specs,
				spec.ContainerSpec{Name: fmt.Sprintf("svc-%03d", i), Image: monImage, WorkloadKind: runtimeid.KindDeployment},
				spec.ContainerSpec{Name: fmt.Sprintf("task-%03d", i), Image: monImage, WorkloadKind: runtimeid.KindJob,
					Labels: map[string]string{labelHold: "true"}})
		}
		ids := e.bulkCreate(specs) // svc-000, task-000, svc-001 ...
		c := client(t)
		ctx := t.Context()
		want := map[string]string{}
		bg := metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}
		for i, id := range ids {
			if i%4 >= 2 {
				want[id] = "running"
				continue
			}
			want[id] = "deleted"
			name := fmt.Sprintf("svc-%03d", i/2)
			err := c.AppsV1().Deployments(e.ns).Delete(ctx, name, bg)
			if i%2 == 1 {
				name = fmt.Sprintf("task-%03d", i/2)
				err = c.BatchV1().Jobs(e.ns).Delete(ctx, name, bg)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 2*time.Minute, func() (bool, error) {
			ds, err := c.AppsV1().Deployments(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			js, err := c.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			if len(ds.Items) != perKind/2 || len(js.Items) != perKind/2 {
				return false, fmt.Errorf("%d deployments and %d jobs left, want %d of each", len(ds.Items), len(js.Items), perKind/2)
			}
			return true, nil
		})
		waitCounts(t, e.ns, perKind/2, perKind/2)
		e.countRecover(t, fmt.Sprintf("reattached %d, changed %d, now terminal %d", 2*perKind, 2*perKind, perKind),
			map[string]int{"watch deployments": 2, "watch jobs": 2, "watch pods": 1, "watch replicasets": 1})
		e.checkStates(want)
	})
	t.Run("half failed", func(t *testing.T) {
		const n = 20
		e := newMonEnv(t)
		waitRoom(t, n)
		specs := make([]spec.ContainerSpec, 0, n)
		for i := range n {
			labels := map[string]string{labelHold: "true"}
			if i%2 == 1 {
				labels = map[string]string{labelExitCode: "3"}
			}
			specs = append(specs, spec.ContainerSpec{Name: fmt.Sprintf("task-%03d", i), Image: monImage, WorkloadKind: runtimeid.KindJob, Labels: labels})
		}
		ids := e.bulkCreate(specs)
		waitFor(t, 2*time.Minute, func() (bool, error) {
			_, failed, _, err := jobsFinished(t, e.ns)
			if err != nil || failed != n/2 {
				return false, fmt.Errorf("%d of %d jobs failed (%v)", failed, n/2, err)
			}
			return true, nil
		})
		waitCounts(t, e.ns, 0, n/2)
		e.countRecover(t, fmt.Sprintf("reattached %d, changed %d, now terminal %d", n, n, n/2),
			map[string]int{"watch jobs": 1, "watch pods": 1})
		ws := e.records()
		for i, id := range ids {
			w := ws[id]
			switch {
			case i%2 == 0 && w.State != "running":
				t.Errorf("%s is %q, want running", id, w.State)
			case i%2 == 1 && (w.State != "failed" || w.ExitCode == nil || *w.ExitCode != 3):
				t.Errorf("%s is %q with exit code %v, want failed with exit code 3 (from the pods streamed)", id, w.State, w.ExitCode)
			}
		}
	})
	t.Run("killed mid-request, then ps --refresh", func(t *testing.T) {
		const perKind = 10
		e := newMonEnv(t)
		waitRoom(t, 2*perKind)
		specs := make([]spec.ContainerSpec, 0, 2*perKind)
		for i := range perKind {
			specs = append(specs,
				spec.ContainerSpec{Name: fmt.Sprintf("svc-%03d", i), Image: monImage, WorkloadKind: runtimeid.KindDeployment},
				spec.ContainerSpec{Name: fmt.Sprintf("task-%03d", i), Image: monImage, WorkloadKind: runtimeid.KindJob,
					Labels: map[string]string{labelHold: "true"}})
		}
		ids := e.bulkCreate(specs) // svc-000, task-000, svc-001 ...
		svc := func(i int) string { return ids[2*i] }
		task := func(i int) string { return ids[2*i+1] }
		waitCounts(t, e.ns, perKind, perKind)
		e.runOK("recover", "--once") // every record running
		e.checkStates(statesOf(ids, "running"))

		// What processes killed between the intent and the API call leave (lifecycle.Engine:
		// the intent is recorded first): stops and deletes that never reached the cluster,
		// a delete and a stop that did, before the process could record what followed.
		c := client(t)
		ctx := t.Context()
		stop := store.Transition{Type: store.StopRequested, Expect: store.ContainerExited, Message: "scale to 0"}
		del := store.Transition{Type: store.DeleteRequested, Message: "delete"}
		e.intents(map[string]store.Transition{svc(0): stop, svc(1): stop, svc(2): stop, task(0): del, task(1): del, task(2): del})
		bg := metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}
		if err := c.BatchV1().Jobs(e.ns).Delete(ctx, "task-002", bg); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AppsV1().Deployments(e.ns).UpdateScale(ctx, "svc-002", &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "svc-002", Namespace: e.ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 2*time.Minute, func() (bool, error) {
			if _, err := c.BatchV1().Jobs(e.ns).Get(ctx, "task-002", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("job task-002 still there (%v)", err)
			}
			d, err := c.AppsV1().Deployments(e.ns).Get(ctx, "svc-002", metav1.GetOptions{})
			if err != nil || d.Status.Replicas != 0 || d.Status.ObservedGeneration < d.Generation {
				return false, fmt.Errorf("deployment svc-002 not scaled to 0 yet (%v)", err)
			}
			return true, nil
		})
		// recover heals the five requests that never took effect from one stream per kind, not a
		// read each (4 RequestFailed, 1 ContainerDeleted), sends nothing (no write), and the
		// reconcile pass records the stop that did (svc-002 exited).
		r := e.countCommand(t, []string{"recover", "--once"},
			map[string]int{"watch deployments": 2, "watch jobs": 2, "watch pods": 1, "watch replicasets": 1})
		if got, want := lastLine(r.stdout), fmt.Sprintf("reattached %d, changed 6, now terminal 1", 2*perKind-1); got != want {
			t.Errorf("recover --once summary %q, want %q", got, want)
		}
		want := statesOf(ids, "running")
		want[task(2)], want[svc(2)] = "deleted", "exited"
		e.checkStates(want)
		for _, id := range []string{svc(0), svc(1), task(0), task(1)} {
			if evs := e.events(id); len(evs) == 0 || evs[len(evs)-1].Type != "RequestFailed" {
				t.Errorf("%s: last event %v, want RequestFailed", id, evs)
			}
		}

		// ps --refresh: the same reconcile pass, constant requests: two objects deleted while
		// nothing watched are confirmed gone by one metadata-only watch-list per kind.
		for _, err := range []error{
			c.AppsV1().Deployments(e.ns).Delete(ctx, "svc-003", bg), c.BatchV1().Jobs(e.ns).Delete(ctx, "task-003", bg),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 2*time.Minute, func() (bool, error) {
			_, derr := c.AppsV1().Deployments(e.ns).Get(ctx, "svc-003", metav1.GetOptions{})
			_, jerr := c.BatchV1().Jobs(e.ns).Get(ctx, "task-003", metav1.GetOptions{})
			if !apierrors.IsNotFound(derr) || !apierrors.IsNotFound(jerr) {
				return false, fmt.Errorf("svc-003 (%v) or task-003 (%v) still there", derr, jerr)
			}
			return true, nil
		})
		r = e.countCommand(t, []string{"ps", "--refresh", "-a", "-o", "name", "--state", "deleted"},
			map[string]int{"watch deployments": 2, "watch jobs": 2, "watch pods": 1, "watch replicasets": 1})
		if got, want := r.stdout, strings.Join(slices.Sorted(slices.Values([]string{svc(3), task(2), task(3)})), "\n")+"\n"; got != want {
			t.Errorf("ps --refresh -a -o name --state deleted:\n%s\nwant:\n%s", got, want)
		}
	})
}

// countRecover runs recover --once as a user of its own and checks its summary and its
// requests as the API server's audit log has them (countCommand).
func (e *monEnv) countRecover(t *testing.T, summary string, want map[string]int) {
	t.Helper()
	r := e.countCommand(t, []string{"recover", "--once"}, want)
	if got := lastLine(r.stdout); got != summary {
		t.Errorf("recover --once summary %q, want %q", got, summary)
	}
}

// countCommand runs the plugin with args as a user of its own, and checks its requests as the
// API server's audit log has them: exactly want (by "verb resource"; so no write unless want
// names it), none about one object.
func (e *monEnv) countCommand(t *testing.T, args []string, want map[string]int) result {
	t.Helper()
	u := newAuditUser(t)
	r := e.runOK(append(args, u.flags()...)...)
	reqs := u.requests(t, "kubectl-gobrave/")
	t.Logf("%s made %d API requests (audit log):\n  %s", strings.Join(args, " "), len(reqs), describe(reqs))
	for _, req := range reqs {
		if req.PerObject() {
			t.Errorf("%s: request about one object: %s %s", strings.Join(args, " "), req.Verb, req.URI)
		}
	}
	if d := cmp.Diff(want, countByVerb(reqs)); d != "" {
		t.Errorf("%s: requests by verb and resource (-want +got):\n%s", strings.Join(args, " "), d)
	}
	return r
}

// intents records, in the test's database, what a process killed right after recording a
// verb's intent leaves (lifecycle.Engine's first step, with nothing sent to the cluster): the
// transition of each runtime ID.
func (e *monEnv) intents(ts map[string]store.Transition) {
	t := e.t
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(e.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for id, tr := range ts {
		tr.RuntimeID = id
		if _, ok, err := st.Apply(t.Context(), tr); err != nil || !ok {
			t.Fatalf("intent %s of %s: applied %v, %v", tr.Type, id, ok, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitCounts waits until the namespace has deployments ready deployments with a ready replica
// and jobs jobs with a ready pod.
func waitCounts(t *testing.T, ns string, deployments, jobs int) {
	t.Helper()
	c := client(t)
	ctx := t.Context()
	waitFor(t, 5*time.Minute, func() (bool, error) {
		ds, err := c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		js, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		readyD, readyJ := 0, 0
		for _, d := range ds.Items {
			if d.Status.ReadyReplicas == 1 {
				readyD++
			}
		}
		for _, j := range js.Items {
			if j.Status.Active == 1 && j.Status.Ready != nil && *j.Status.Ready == 1 {
				readyJ++
			}
		}
		if readyD != deployments || readyJ != jobs {
			return false, fmt.Errorf("%d/%d deployments ready, %d/%d jobs running", readyD, deployments, readyJ, jobs)
		}
		return true, nil
	})
}

func statesOf(ids []string, state string) map[string]string {
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		out[id] = state
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// waitRoom waits until the nodes have room for n more running pods: the pods of earlier tests'
// namespaces go away asynchronously.
func waitRoom(t *testing.T, n int) {
	t.Helper()
	c := client(t)
	ctx := t.Context()
	waitFor(t, 3*time.Minute, func() (bool, error) {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		capacity := int64(0)
		for _, n := range nodes.Items {
			capacity += n.Status.Allocatable.Pods().Value()
		}
		used := int64(0)
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				used++
			}
		}
		if free := capacity - used; free < int64(n) {
			return false, fmt.Errorf("room for %d pods (%d nodes, %d pods), want %d", free, len(nodes.Items), used, n)
		}
		return true, nil
	})
}

// bulkCreate creates the workloads of specs in the test's namespace with client-go, 16 at a time,
// as `create` would build them, and records them (state created) in the test's database with
// pkg/store: hundreds of workloads in seconds, where `kubectl gobrave create` would take minutes.
// It returns their runtime IDs in order.
func (e *monEnv) bulkCreate(specs []spec.ContainerSpec) []string {
	t := e.t
	t.Helper()
	c := client(t)
	ctx := t.Context()
	type made struct {
		s   spec.ContainerSpec
		uid string
	}
	results := make([]made, len(specs))
	errs := make([]error, len(specs))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s.RuntimeNamespace = e.ns
			if err := s.Validate(); err != nil {
				errs[i] = err
				return
			}
			objs, err := runtime.Build(s, e.ns)
			if err != nil {
				errs[i] = err
				return
			}
			var uid string
			switch {
			case objs.Deployment != nil:
				d, err := c.AppsV1().Deployments(e.ns).Create(ctx, objs.Deployment, metav1.CreateOptions{})
				if err != nil {
					errs[i] = err
					return
				}
				uid = string(d.UID)
			case objs.Job != nil:
				j, err := c.BatchV1().Jobs(e.ns).Create(ctx, objs.Job, metav1.CreateOptions{})
				if err != nil {
					errs[i] = err
					return
				}
				uid = string(j.UID)
			}
			s.Normalize()
			results[i] = made{s: s, uid: uid}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	st, err := store.Open(ctx, filepath.Join(e.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := make([]string, 0, len(results))
	for _, m := range results {
		id, err := runtimeid.New(runtimeid.RuntimeK8s, e.ns, m.s.Kind(), m.s.Name)
		if err != nil {
			t.Fatal(err)
		}
		w := store.Workload{
			RuntimeID: id.String(), Runtime: runtimeid.RuntimeK8s, Namespace: e.ns, Kind: id.Kind, Name: m.s.Name,
			UID: m.uid, Spec: m.s, State: store.StateCreated,
		}
		ev := store.Transition{Type: store.Created, Message: id.Kind + "/" + m.s.Name + " created", UID: m.uid}
		if err := st.Put(ctx, w, ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.String())
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}
