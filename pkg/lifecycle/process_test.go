package lifecycle_test

// A simulated kubectl-gobrave process of the model-based test: its own
// store handle on the shared database file, its own lease owner whose PID is
// a child process that dies with it, and its own connection to the cluster.
// Every API call of the process, and the clock read of Create (between its
// read of the record and the intent), is a step that passes a gate: the test
// can pause the process at its Nth step, fail the Nth API call, or kill the
// process while it is paused.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/lifecycle"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// errKilled is what a killed process gets from the API server: nothing.
var errKilled = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused (the process was killed)")

// verbDeadline bounds how long the test waits for a verb to finish or
// reach its pause: a verb that does neither is a hang, reported as a failure.
const verbDeadline = time.Minute

type process struct {
	name    string
	cluster *cluster
	st      *store.Store
	owner   store.Owner
	holder  *exec.Cmd      // the process whose PID the owner names
	stdin   io.WriteCloser // the holder's stdin: closing it ends the holder
	client  *fake.Clientset
	eng     *lifecycle.Engine

	mu      sync.Mutex
	calls   int  // steps of the current verb so far
	pauseAt int  // the step to pause at (0: none)
	failAt  int  // the step whose API call fails (0: none)
	failed  bool // a call of the current verb was failed
	dead    bool

	paused chan struct{} // the verb reached pauseAt
	decide chan decision // what the test decides at the pause
	run    *verbRun      // the verb paused in this process, nil when idle
}

// decision is the test's answer to a paused step.
type decision struct {
	kill    bool
	reached bool // the killed process's API call reached the server
	again   int  // resume, and pause again this many steps later (0: never)
}

// verbRun is a verb running in a process's goroutine.
type verbRun struct {
	desc string
	done chan verbResult
}

type verbResult struct {
	w   store.Workload
	err error
}

// startProcess starts a process named name on the database at path.
func startProcess(ctx context.Context, name, path string, c *cluster) (*process, error) {
	holder := exec.Command("cat")
	stdin, err := holder.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("start the PID holder of %s: %w", name, err)
	}
	host, _ := os.Hostname()
	p := &process{
		name: name, cluster: c, holder: holder, stdin: stdin,
		owner:  store.Owner{ID: fmt.Sprintf("%s/%d/%s", host, holder.Process.Pid, name), PID: holder.Process.Pid, Host: host},
		paused: make(chan struct{}, 1),
		decide: make(chan decision),
	}
	if p.st, err = store.Open(ctx, path); err != nil {
		p.stopHolder()
		return nil, err
	}
	p.client = fake.NewClientset()
	p.client.PrependReactor("*", "*", p.react)
	p.client.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, errors.New("a verb does not watch")
	})
	p.eng = &lifecycle.Engine{
		Store:  p.st,
		Client: func(string) (kubernetes.Interface, error) { return p.client, nil },
		Owner:  p.owner,
		Now:    p.now,
	}
	return p, nil
}

// react is the process's connection: every call passes the gate, then goes
// to the cluster.
func (p *process) react(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	forward, err := p.gate(a.GetResource())
	if forward {
		obj, ferr := p.cluster.Invokes(a, nil)
		if err == nil {
			return true, obj, ferr
		}
	}
	return true, nil, err
}

// now is the engine's clock: a step of Create between its read of the
// record and its intent.
func (p *process) now() time.Time {
	p.gate(schema.GroupVersionResource{})
	return time.Now()
}

// gate counts a step and pauses, fails or refuses it as the test said. It
// reports whether the call goes to the server, and the error its caller gets.
func (p *process) gate(gvr schema.GroupVersionResource) (forward bool, err error) {
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return false, errKilled
	}
	p.calls++
	n := p.calls
	pause := n == p.pauseAt
	fail := n == p.failAt && gvr.Resource != ""
	if fail {
		p.failed = true
	}
	p.mu.Unlock()
	if fail {
		return false, apierrors.NewServiceUnavailable("the model failed this call")
	}
	if !pause {
		return true, nil
	}
	p.paused <- struct{}{}
	d := <-p.decide
	if d.kill {
		return d.reached, errKilled
	}
	p.mu.Lock()
	p.pauseAt = 0
	if d.again > 0 {
		p.pauseAt = n + d.again
	}
	p.mu.Unlock()
	return true, nil
}

// start runs fn in a goroutine as the process's next verb.
func (p *process) start(ctx context.Context, desc string, pauseAt, failAt int, fn func(context.Context) (store.Workload, error)) *verbRun {
	p.mu.Lock()
	p.calls, p.pauseAt, p.failAt, p.failed = 0, pauseAt, failAt, false
	p.mu.Unlock()
	r := &verbRun{desc: desc, done: make(chan verbResult, 1)}
	go func() {
		w, err := fn(ctx)
		r.done <- verbResult{w: w, err: err}
	}()
	return r
}

// await waits until r finishes or pauses.
func (p *process) await(r *verbRun) (res verbResult, paused bool, err error) {
	timer := time.NewTimer(verbDeadline)
	defer timer.Stop()
	select {
	case res = <-r.done:
		return res, false, nil
	case <-p.paused:
		return verbResult{}, true, nil
	case <-timer.C:
		return verbResult{}, false, fmt.Errorf("%s: %s neither finished nor paused within %s", p.name, r.desc, verbDeadline)
	}
}

// resume lets the paused verb go on, to its end or its next pause.
func (p *process) resume(again int) (res verbResult, paused bool, err error) {
	r := p.run
	p.decide <- decision{again: again}
	res, paused, err = p.await(r)
	if !paused {
		p.run = nil
	}
	return res, paused, err
}

// kill kills the process: nothing more of it is recorded (its store handle
// is closed, its calls refused) and its PID is gone, so its leases are dead.
// A paused verb is let go, its call reaching the server or not, and awaited.
func (p *process) kill(reached bool) error {
	p.mu.Lock()
	p.dead = true
	p.mu.Unlock()
	cerr := p.st.Close()
	p.stopHolder()
	r := p.run
	p.run = nil
	if r == nil {
		return cerr
	}
	p.decide <- decision{kill: true, reached: reached}
	timer := time.NewTimer(verbDeadline)
	defer timer.Stop()
	select {
	case <-r.done:
		return cerr
	case <-timer.C:
		return fmt.Errorf("%s: the killed %s did not return within %s", p.name, r.desc, verbDeadline)
	}
}

// stopHolder ends the PID holder and reaps it: its PID is then free.
func (p *process) stopHolder() {
	p.stdin.Close()
	_ = p.holder.Process.Kill()
	_ = p.holder.Wait()
}

// failedCall reports whether a call of the last verb was failed on purpose.
func (p *process) failedCall() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}
