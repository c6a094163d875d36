package store

import (
	"errors"
	"time"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// ErrNotFound is returned when no workload has the runtime ID.
var ErrNotFound = errors.New("no such runtime ID in the state database")

// State is the last known state of a workload.
type State string

// States. Exited, failed and deleted are terminal: nothing is monitored after them
// (start/resume can still move exited and failed workloads back to starting).
// Paused is not terminal: a suspended job (spec.suspend, set by gobrave's
// pause or from outside, as Kueue or kubectl patch do) is still monitored,
// and runs again when it is unsuspended.
const (
	StateCreated  State = "created"
	StateStarting State = "starting"
	StateRunning  State = "running"
	StatePaused   State = "paused"
	StateStopping State = "stopping"
	StateExited   State = "exited"
	StateFailed   State = "failed"
	StateDeleted  State = "deleted"
)

// Terminal reports whether s ends monitoring.
func (s State) Terminal() bool {
	return s == StateExited || s == StateFailed || s == StateDeleted
}

// EventType names an entry of a workload's history.
type EventType string

// Observed event types, emitted by the monitor from Kubernetes status.
const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerExited  EventType = "ContainerExited"
	ContainerFailed  EventType = "ContainerFailed"
	ContainerDeleted EventType = "ContainerDeleted"
	// ContainerPaused says the workload is suspended: its pods are gone and
	// its object is kept (a Job with spec.suspend whose Suspended condition
	// the job controller set). Its message is SuspendedMessage.
	ContainerPaused EventType = "ContainerPaused"
	// ContainerWaiting: the newest pod of the workload waits with a reason
	// (its image cannot be pulled, it crash-loops, it cannot be scheduled).
	// It changes no state: the record keeps its state with the reason set,
	// and is recorded again only when the reason changes.
	ContainerWaiting EventType = "ContainerWaiting"
)

// SuspendedMessage is the message of a ContainerPaused event of a suspended
// job: the machine-readable reason of the paused state.
const SuspendedMessage = "suspended"

// Requested event types, recorded by the lifecycle verbs.
const (
	Created         EventType = "Created"
	StartRequested  EventType = "StartRequested"
	StopRequested   EventType = "StopRequested"
	PauseRequested  EventType = "PauseRequested"
	ResumeRequested EventType = "ResumeRequested"
	// RestartRequested asks for a new run: a rollout restart of a
	// deployment, a job deleted and created again from the recorded spec.
	RestartRequested EventType = "RestartRequested"
	DeleteRequested  EventType = "DeleteRequested"
	Adopted          EventType = "Adopted"
	// RequestFailed compensates a requested event whose action failed: it
	// puts the state back to what it was before the request (when no later
	// request came) and keeps the error as its message.
	RequestFailed EventType = "RequestFailed"
	// SpecUpdated records a new spec of the workload (`update`), written
	// with its revision by Store.UpdateSpec. With Expect ContainerStarted
	// the new spec rolls out now (a service's new pods) and the record is
	// starting until they run; without, the state, the request and its
	// expectation stay (a job takes the spec at its next run, a stopped
	// service at its next start).
	SpecUpdated EventType = "SpecUpdated"
)

// Observed reports whether t comes from the monitor rather than from a verb.
func (t EventType) Observed() bool {
	switch t {
	case ContainerStarted, ContainerExited, ContainerFailed, ContainerDeleted, ContainerPaused, ContainerWaiting:
		return true
	}
	return false
}

// Stopped reports whether the last request was a stop or a pause: an exited
// workload that was stopped, not one that ran to its end.
func (w Workload) Stopped() bool {
	return w.Request == StopRequested || w.Request == PauseRequested
}

// Workload is one row of the workloads table.
type Workload struct {
	RuntimeID string             `json:"runtimeID"`
	Runtime   string             `json:"runtime"`
	Namespace string             `json:"namespace"`
	Kind      string             `json:"kind"`
	Name      string             `json:"name"`
	UID       string             `json:"uid"`
	Spec      spec.ContainerSpec `json:"spec"`
	State     State              `json:"state"`
	Message   string             `json:"message"`
	// Result is the machine-readable outcome of the current run, or why it
	// is stuck (see Result).
	Result
	// Epoch counts the requests made of this record: every requested event
	// but RequestFailed raises it (Created is epoch 1). Observed events are
	// idempotent per (runtime ID, UID, type, epoch): each request gets its
	// own observations.
	Epoch int `json:"epoch"`
	// Request is the type of the last requested event.
	Request EventType `json:"request"`
	// Expect is the observed event that completes Request when the
	// workload's kind says so (a job's stop ends with ContainerDeleted).
	Expect    EventType `json:"expect,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Event is one row of the append-only events table (SetObjectUID fills in
// the UID of a request made before its object existed; Forget removes a
// refused create's own record).
type Event struct {
	Seq       int64     `json:"-"`
	RuntimeID string    `json:"runtimeID"`
	Type      EventType `json:"type"`
	Message   string    `json:"message"`
	UID       string    `json:"uid"`
	Time      time.Time `json:"time"`
	Result
}

// Transition asks the store to record an event and move the workload's state.
type Transition struct {
	RuntimeID string
	Type      EventType
	Message   string
	// UID is the Kubernetes object UID the event is about ("" when unknown).
	// A non-empty UID on a requested event also updates the workload's UID.
	UID  string
	Time time.Time // zero means now
	// Result, on an observed event, is its reason, exit code and times.
	Result
	// Epoch, when not 0, is the epoch the event belongs to: an observed
	// event made for an older request, or a RequestFailed of a request that
	// a later one superseded, records nothing or (RequestFailed) keeps the
	// state.
	Epoch int
	// Expect, on a requested event, is the observed event type that
	// completes the request for this kind, when it is not the obvious one.
	Expect EventType
	// Retire, on a requested event, says the record's object is being
	// replaced by a new one (a finished job created again): the record
	// forgets its UID, and observations about objects of earlier epochs are
	// ignored until the new object is seen.
	Retire bool
	// Restore, on RequestFailed, is the state to go back to.
	Restore State
	// RestoreRequest and RestoreExpect, on RequestFailed, are the request
	// and its expected completion to go back to with Restore, when set:
	// those of the record before the failed request, so that what is
	// observed next is judged by the request that stands (a job whose
	// stop stands ends exited when it goes, not deleted).
	RestoreRequest, RestoreExpect EventType
}

// Filter selects workloads for List.
type Filter struct {
	// All includes terminal workloads; otherwise only non-terminal ones.
	All       bool
	States    []State // when set, only these states (overrides All)
	Runtime   string
	Namespace string
	Kind      string
	Name      string
	// NoSpec leaves Workload.Spec empty: listings that never show the spec
	// (ps) skip reading and decoding it, most of List's cost.
	NoSpec bool
}

// Owner identifies a monitoring process for leases.
type Owner struct {
	ID   string // unique per process, e.g. host/pid/random
	PID  int
	Host string
}

// Reasons the store itself sets (the others come from the cluster through
// the monitor: Completed, Error, BackoffLimitExceeded, ImagePullBackOff ...).
const (
	ReasonStopped = "Stopped"
	ReasonDeleted = "Deleted"
)

// Result is the structured outcome carried by an event and kept on the
// record: a machine-readable reason, the container's exit code (nil when
// unknown) and when the run started and finished (nil when unknown).
type Result struct {
	Reason     string     `json:"reason"`
	ExitCode   *int32     `json:"exitCode"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}
