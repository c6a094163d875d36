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
const (
	StateCreated  State = "created"
	StateStarting State = "starting"
	StateRunning  State = "running"
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
)

// Requested event types, recorded by the lifecycle verbs.
const (
	Created         EventType = "Created"
	StartRequested  EventType = "StartRequested"
	StopRequested   EventType = "StopRequested"
	PauseRequested  EventType = "PauseRequested"
	ResumeRequested EventType = "ResumeRequested"
	DeleteRequested EventType = "DeleteRequested"
	Adopted         EventType = "Adopted"
)

// Observed reports whether t comes from the monitor rather than from a verb.
func (t EventType) Observed() bool {
	switch t {
	case ContainerStarted, ContainerExited, ContainerFailed, ContainerDeleted:
		return true
	}
	return false
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
	// Run counts the starts of this record (Created is run 1, each
	// StartRequested/ResumeRequested adds one). Observed events are
	// idempotent per (runtime ID, UID, type, run).
	Run       int       `json:"run"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Event is one row of the append-only events table.
type Event struct {
	Seq       int64     `json:"-"`
	RuntimeID string    `json:"runtimeID"`
	Type      EventType `json:"type"`
	Message   string    `json:"message"`
	UID       string    `json:"uid"`
	Time      time.Time `json:"time"`
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
