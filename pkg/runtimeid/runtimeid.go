// Package runtimeid parses and formats gobrave runtime IDs:
//
//	<runtime>-<namespace>|<kind>|<name>
//
// for example k8s-default|deployment|web-api or k3s-ai|job|batch-import-001.
package runtimeid

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Format is the expected shape of a runtime ID, quoted in every parse error.
const Format = "<runtime>-<namespace>|<kind>|<name>, e.g. k8s-default|deployment|web-api"

// ErrInvalid is wrapped by every parse or validation error.
var ErrInvalid = errors.New("invalid runtime ID")

// Kinds of workload.
const (
	KindDeployment = "deployment"
	KindJob        = "job"
)

// Runtime names.
const (
	RuntimeK8s = "k8s"
	RuntimeK3s = "k3s"
)

// Runtimes lists the supported runtime names.
var Runtimes = []string{RuntimeK8s, RuntimeK3s}

// Kinds lists the supported workload kinds.
var Kinds = []string{KindDeployment, KindJob}

// ID identifies one workload managed by gobrave.
type ID struct {
	Runtime   string
	Namespace string
	Kind      string
	Name      string
}

// New returns a validated ID.
func New(runtime, namespace, kind, name string) (ID, error) {
	id := ID{Runtime: runtime, Namespace: namespace, Kind: kind, Name: name}
	if err := id.Validate(); err != nil {
		return ID{}, err
	}
	return id, nil
}

// String formats the ID as <runtime>-<namespace>|<kind>|<name>.
func (id ID) String() string {
	return id.Runtime + "-" + id.Namespace + "|" + id.Kind + "|" + id.Name
}

// Key is the monitor's subscription key kind|namespace|name: the same
// workload seen through two runtime profiles of one cluster shares it.
func (id ID) Key() string {
	return id.Kind + "|" + id.Namespace + "|" + id.Name
}

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// Validate checks every part of the ID.
func (id ID) Validate() error {
	return id.validate(id.String())
}

func (id ID) validate(quoted string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s (expected %s)", ErrInvalid, quoted, fmt.Sprintf(format, a...), Format)
	}
	if !IsRuntime(id.Runtime) {
		return bad("unknown runtime %q, use one of %s", id.Runtime, strings.Join(Runtimes, ", "))
	}
	if id.Namespace == "" {
		return bad("empty namespace")
	}
	if errs := validation.IsDNS1123Label(id.Namespace); len(errs) > 0 {
		return bad("namespace %q is not a DNS-1123 label: %s", id.Namespace, errs[0])
	}
	if id.Kind == "" {
		return bad("empty kind")
	}
	if !IsKind(id.Kind) {
		return bad("unknown kind %q, use one of %s", id.Kind, strings.Join(Kinds, ", "))
	}
	if id.Name == "" {
		return bad("empty name")
	}
	if errs := validation.IsDNS1123Label(id.Name); len(errs) > 0 {
		return bad("name %q is not a DNS-1123 label: %s", id.Name, errs[0])
	}
	return nil
}

// Parse parses a runtime ID strictly.
func Parse(s string) (ID, error) {
	parts := strings.Split(s, "|")
	if len(parts) != 3 {
		return ID{}, fmt.Errorf("%w %q: want 3 fields separated by '|', got %d (expected %s)", ErrInvalid, s, len(parts), Format)
	}
	runtime, namespace, ok := strings.Cut(parts[0], "-")
	if !ok {
		return ID{}, fmt.Errorf("%w %q: first field %q is not <runtime>-<namespace> (expected %s)", ErrInvalid, s, parts[0], Format)
	}
	id := ID{Runtime: runtime, Namespace: namespace, Kind: parts[1], Name: parts[2]}
	if err := id.validate(s); err != nil {
		return ID{}, err
	}
	return id, nil
}

// IsRuntime reports whether name is a supported runtime.
func IsRuntime(name string) bool { return name == RuntimeK8s || name == RuntimeK3s }

// IsKind reports whether kind is a supported workload kind.
func IsKind(kind string) bool { return kind == KindDeployment || kind == KindJob }
