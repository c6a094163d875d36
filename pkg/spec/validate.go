package spec

import (
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Workload kinds.
const (
	KindDeployment = runtimeid.KindDeployment
	KindJob        = runtimeid.KindJob
)

// Pull policies.
const (
	PullAlways       = "Always"
	PullIfNotPresent = "IfNotPresent"
	PullNever        = "Never"
)

// Security profiles: the Pod Security Standard the pod template passes.
const (
	ProfileBaseline   = "baseline"
	ProfileRestricted = "restricted"
)

// AllowUnsafeHostPathFlag is the flag that allows the hostPaths UnsafeHostPath refuses.
const AllowUnsafeHostPathFlag = "--allow-unsafe-host-path"

// RuntimeSockets are the host paths of the known container runtimes' API
// sockets: a container that mounts one controls every container of the node.
var RuntimeSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock",
	"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
	"/run/k3s/containerd/containerd.sock",
	"/var/run/crio/crio.sock", "/run/crio/crio.sock",
	"/var/run/cri-dockerd.sock", "/run/cri-dockerd.sock",
	"/var/run/dockershim.sock",
	"/run/podman/podman.sock", "/var/run/podman/podman.sock",
}

// UnsafeHostPath says why mounting the node's path src hands the node to the
// container ("" when it does not): src is /, a known container runtime
// socket, or a folder holding one (such as /var/run).
func UnsafeHostPath(src string) string {
	p := path.Clean(src)
	if p == "/" {
		return "it is the node's whole filesystem"
	}
	for _, sock := range RuntimeSockets {
		if p == sock {
			return "it is a container runtime's socket, which controls every container of the node"
		}
		if strings.HasPrefix(sock, p+"/") {
			return fmt.Sprintf("it holds the container runtime socket %s, which controls every container of the node", sock)
		}
	}
	return ""
}

// ConstraintTypeNode is the only scheduling constraint type.
const ConstraintTypeNode = "node"

// HostnameKey is the short constraint key for the node label kubernetes.io/hostname.
const HostnameKey = "hostname"

// Scheduling constraint operators, spelled as in Kubernetes node affinity.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
	OpGt           = "Gt"
	OpLt           = "Lt"
)

// Operators lists the scheduling constraint operators.
var Operators = []string{OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt}

// ReservedLabels are set by gobrave on every workload and cannot be replaced.
var ReservedLabels = []string{"app", "gobrave-workload", "gobrave.dev/kind"}

const dns1123LabelHint = "must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)"

// maxCPU keeps the milli-core count within int64.
const maxCPU = math.MaxInt64 / 1000

// Kind returns the workload kind, deployment when WorkloadKind is empty.
func (s ContainerSpec) Kind() string {
	if s.WorkloadKind == "" {
		return KindDeployment
	}
	return s.WorkloadKind
}

// Normalize fills in defaults: WorkloadKind deployment, PullPolicy
// IfNotPresent and constraint Type node.
func (s *ContainerSpec) Normalize() {
	if s.WorkloadKind == "" {
		s.WorkloadKind = KindDeployment
	}
	if s.PullPolicy == "" {
		s.PullPolicy = PullIfNotPresent
	}
	for i := range s.SchedulingConstraints {
		if s.SchedulingConstraints[i].Type == "" {
			s.SchedulingConstraints[i].Type = ConstraintTypeNode
		}
	}
}

// Parse parses q as a Kubernetes quantity; a bare integer is bytes.
func (q Quantity) Parse() (resource.Quantity, error) {
	if q == "" {
		return resource.Quantity{}, invalidf("memory: empty; use bytes or a quantity such as 256Mi")
	}
	v, err := resource.ParseQuantity(string(q))
	if err != nil {
		return resource.Quantity{}, invalidf("memory %q: must be bytes or a quantity such as 256Mi or 1Gi", string(q))
	}
	return v, nil
}

// CPUQuantity returns CPU as a milli-core quantity (0.5 is 500m), and false
// when CPU is unset (0) or not a valid positive number.
func (s ContainerSpec) CPUQuantity() (resource.Quantity, bool) {
	if !(s.CPU > 0) || s.CPU > maxCPU || math.IsInf(s.CPU, 0) {
		return resource.Quantity{}, false
	}
	milli := int64(math.Round(s.CPU * 1000))
	if milli <= 0 {
		return resource.Quantity{}, false
	}
	return *resource.NewMilliQuantity(milli, resource.DecimalSI), true
}

// ParseUser parses "uid" or "uid:gid", both non-negative decimal integers.
// gid is nil when absent.
func ParseUser(u string) (uid int64, gid *int64, err error) {
	bad := invalidf("user %q: must be a numeric uid or uid:gid, e.g. 1000 or 1000:1000", u)
	uidText, gidText, hasGID := strings.Cut(u, ":")
	uid, ok := parseID(uidText)
	if !ok {
		return 0, nil, bad
	}
	if !hasGID {
		return uid, nil, nil
	}
	g, ok := parseID(gidText)
	if !ok {
		return 0, nil, bad
	}
	return uid, &g, nil
}

func parseID(s string) (int64, bool) {
	if s == "" || strings.TrimFunc(s, func(r rune) bool { return r >= '0' && r <= '9' }) != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Validate checks every field and reports every problem at once, joined;
// each problem wraps ErrInvalid and names the field and the bad value.
// Validate makes no API call. A PullPolicy of Never passes here; the
// runtime refuses it in its preflight.
func (s ContainerSpec) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, invalidf(format, a...)) }

	switch {
	case s.Name == "":
		add("name: required, a DNS-1123 label such as web-api")
	case len(validation.IsDNS1123Label(s.Name)) > 0:
		add("name %q: %s", s.Name, dns1123LabelHint)
	}

	switch {
	case s.Image == "":
		add("image: required, e.g. nginx:1.27")
	case strings.IndexFunc(s.Image, unicode.IsSpace) >= 0:
		add("image %q: must not contain whitespace", s.Image)
	}

	if k := s.WorkloadKind; k != "" && k != KindDeployment && k != KindJob {
		add("workloadKind %q: must be %s or %s", k, KindDeployment, KindJob)
	}
	if ns := s.RuntimeNamespace; ns != "" && len(validation.IsDNS1123Label(ns)) > 0 {
		add("runtimeNamespace %q: %s", ns, dns1123LabelHint)
	}

	switch c := s.CPU; {
	case math.IsNaN(c) || math.IsInf(c, 0):
		add("cpu %v: must be a finite number of cores such as 0.5", c)
	case c < 0:
		add("cpu %v: must be a positive number of cores such as 0.5, or 0 to leave it unset", c)
	case c > maxCPU:
		add("cpu %v: too large; use a number of cores such as 2", c)
	case c > 0 && math.Round(c*1000) < 1:
		add("cpu %v: must be at least 0.001 cores (1m)", c)
	}

	if s.Memory != "" {
		if q, err := s.Memory.Parse(); err != nil {
			errs = append(errs, err)
		} else if q.Sign() <= 0 {
			add("memory %q: must be positive, e.g. 256Mi", string(s.Memory))
		}
	}

	if p := s.ExposedPort; p < 0 || p > 65535 {
		add("exposedPort %d: must be between 1 and 65535, or 0 to expose no port", p)
	}
	if s.ExposeService {
		if s.ExposedPort <= 0 {
			add("exposeService: requires exposedPort, the container port the service forwards to")
		}
		if s.Kind() != KindDeployment {
			add("exposeService: only a deployment can expose a service, not workloadKind %q", s.Kind())
		}
	}

	if s.ProgressDeadline != "" {
		if _, err := s.ProgressDeadlineSeconds(); err != nil {
			errs = append(errs, err)
		}
		if s.Kind() != KindDeployment {
			add("progressDeadline %q: only a deployment has a progress deadline, not workloadKind %q", s.ProgressDeadline, s.Kind())
		}
	}

	targets := map[string]int{}
	for i, v := range s.Volumes {
		if !path.IsAbs(v.Source) {
			add("volumes[%d].source %q: must be an absolute path on the node, e.g. /data", i, v.Source)
		}
		if path.IsAbs(v.Source) && !s.AllowUnsafeHostPath {
			if why := UnsafeHostPath(v.Source); why != "" {
				add("volumes[%d].source %q: refused, %s; mount a narrower folder, or pass %s (allowUnsafeHostPath: true in a spec file) if that is really meant", i, v.Source, why, AllowUnsafeHostPathFlag)
			}
		}
		if s.SecurityProfile == ProfileRestricted {
			add("volumes[%d]: securityProfile restricted forbids hostPath volumes (the restricted Pod Security Standard allows none); drop the volume or use the baseline profile", i)
		}
		if !path.IsAbs(v.Target) {
			add("volumes[%d].target %q: must be an absolute path in the container, e.g. /data", i, v.Target)
			continue
		}
		t := path.Clean(v.Target)
		if j, dup := targets[t]; dup {
			add("volumes[%d].target %q: already mounted by volumes[%d]; use a distinct target", i, v.Target, j)
			continue
		}
		targets[t] = i
	}

	if s.User != "" {
		if uid, _, err := ParseUser(s.User); err != nil {
			errs = append(errs, err)
		} else if uid == 0 && s.SecurityProfile == ProfileRestricted {
			add("user %q: securityProfile restricted runs as non-root, uid 0 is refused; use a non-zero uid such as 1000", s.User)
		}
	}

	switch s.SecurityProfile {
	case "", ProfileBaseline, ProfileRestricted:
	default:
		add("securityProfile %q: must be %s (the default) or %s", s.SecurityProfile, ProfileBaseline, ProfileRestricted)
	}

	envNames := map[string]string{}
	for _, k := range sortedKeys(s.Env) {
		envNames[k] = "env"
	}
	for i, e := range s.EnvSecrets {
		field := fmt.Sprintf("envSecrets[%d]", i)
		switch {
		case e.Name == "":
			add("%s.name: required, an environment variable name such as DB_PASSWORD", field)
		case len(validation.IsEnvVarName(e.Name)) > 0:
			add("%s.name %q: %s", field, e.Name, strings.Join(validation.IsEnvVarName(e.Name), "; "))
		case envNames[e.Name] != "":
			add("%s.name %q: already set by %s; set each variable once", field, e.Name, envNames[e.Name])
		default:
			envNames[e.Name] = field
		}
		if e.Secret == "" {
			add("%s.secret: required, the name of a Secret in the workload's namespace", field)
		} else if msgs := validation.IsDNS1123Subdomain(e.Secret); len(msgs) > 0 {
			add("%s.secret %q: must be a Secret name (a DNS-1123 subdomain): %s", field, e.Secret, strings.Join(msgs, "; "))
		}
		if e.Key == "" {
			add("%s.key: required, a key of the Secret", field)
		} else if msgs := validation.IsConfigMapKey(e.Key); len(msgs) > 0 {
			add("%s.key %q: %s", field, e.Key, strings.Join(msgs, "; "))
		}
	}
	seenSecrets := map[string]int{}
	for i, name := range s.EnvFromSecrets {
		field := fmt.Sprintf("envFromSecrets[%d]", i)
		if name == "" {
			add("%s: empty; give the name of a Secret in the workload's namespace", field)
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			add("%s %q: must be a Secret name (a DNS-1123 subdomain): %s", field, name, strings.Join(msgs, "; "))
			continue
		}
		if j, dup := seenSecrets[name]; dup {
			add("%s %q: already listed as envFromSecrets[%d]; list each Secret once", field, name, j)
			continue
		}
		seenSecrets[name] = i
	}

	for _, k := range sortedKeys(s.Env) {
		if k == "" {
			add("env: a variable has an empty name; use NAME=value")
			continue
		}
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			add("env %q: %s", k, strings.Join(msgs, "; "))
		}
	}

	for _, k := range sortedKeys(s.Labels) {
		if isReservedLabel(k) {
			add("labels %q: reserved by gobrave, cannot replace it; choose another key", k)
			continue
		}
		if msgs := content.IsLabelKey(k); len(msgs) > 0 {
			add("labels key %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := content.IsLabelValue(s.Labels[k]); len(msgs) > 0 {
			add("labels %q value %q: %s", k, s.Labels[k], strings.Join(msgs, "; "))
		}
	}

	switch s.PullPolicy {
	case "", PullAlways, PullIfNotPresent, PullNever:
	default:
		add("pullPolicy %q: must be %s or %s (%s is accepted here but refused by the runtime)", s.PullPolicy, PullAlways, PullIfNotPresent, PullNever)
	}

	for i, c := range s.SchedulingConstraints {
		field := fmt.Sprintf("schedulingConstraints[%d]", i)
		if c.Type != "" && c.Type != ConstraintTypeNode {
			add("%s.type %q: must be %s", field, c.Type, ConstraintTypeNode)
		}
		if msg := checkConstraint(c); msg != "" {
			add("%s: %s", field, msg)
		}
	}
	return errors.Join(errs...)
}

// checkConstraint checks key, operator and values; it returns "" when they
// are valid.
func checkConstraint(c SchedulingConstraint) string {
	var msgs []string
	switch {
	case c.Key == "":
		msgs = append(msgs, "key is required, a node label such as disktype or hostname")
	case len(content.IsLabelKey(c.Key)) > 0:
		msgs = append(msgs, fmt.Sprintf("key %q: %s", c.Key, strings.Join(content.IsLabelKey(c.Key), "; ")))
	}
	switch c.Operator {
	case OpIn, OpNotIn:
		if len(c.Values) == 0 {
			msgs = append(msgs, fmt.Sprintf("operator %s needs at least one value", c.Operator))
		}
	case OpExists, OpDoesNotExist:
		if len(c.Values) > 0 {
			msgs = append(msgs, fmt.Sprintf("operator %s takes no values, got %q", c.Operator, c.Values))
		}
	case OpGt, OpLt:
		if len(c.Values) != 1 {
			msgs = append(msgs, fmt.Sprintf("operator %s needs exactly one integer value, got %q", c.Operator, c.Values))
		} else if _, err := strconv.ParseInt(c.Values[0], 10, 64); err != nil {
			msgs = append(msgs, fmt.Sprintf("operator %s needs an integer value, got %q", c.Operator, c.Values[0]))
		}
	case "":
		msgs = append(msgs, "operator is required, one of "+strings.Join(Operators, ", "))
	default:
		msgs = append(msgs, fmt.Sprintf("operator %q: must be one of %s", c.Operator, strings.Join(Operators, ", ")))
	}
	return strings.Join(msgs, "; ")
}

func isReservedLabel(k string) bool {
	for _, r := range ReservedLabels {
		if k == r {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// maxProgressDeadline bounds progressDeadlineSeconds (an int32).
const maxProgressDeadline = math.MaxInt32 * time.Second

// ProgressDeadlineSeconds is ProgressDeadline as the Deployment's
// progressDeadlineSeconds; 0 when unset. An error (wrapping ErrInvalid)
// names the bad value: not a duration, not positive, not whole seconds.
func (s ContainerSpec) ProgressDeadlineSeconds() (int32, error) {
	if s.ProgressDeadline == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s.ProgressDeadline)
	switch {
	case err != nil:
		return 0, invalidf("progressDeadline %q: not a duration; use whole seconds such as 90s or 10m", s.ProgressDeadline)
	case d <= 0:
		return 0, invalidf("progressDeadline %q: must be positive, such as 90s or 10m", s.ProgressDeadline)
	case d%time.Second != 0:
		return 0, invalidf("progressDeadline %q: must be whole seconds, such as %ds", s.ProgressDeadline, (d+time.Second-1)/time.Second)
	case d > maxProgressDeadline:
		return 0, invalidf("progressDeadline %q: too long; at most %ds", s.ProgressDeadline, math.MaxInt32)
	}
	return int32(d / time.Second), nil
}
