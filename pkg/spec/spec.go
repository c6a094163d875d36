// Package spec defines ContainerSpec, the user's description of a workload,
// its validation and its YAML file form.
package spec

// ContainerSpec describes one gobrave workload. Its YAML/JSON form uses the
// lowerCamelCase names below; an unknown field in a file is an error.
type ContainerSpec struct {
	// Name becomes the Deployment or Job name: a DNS-1123 label, at most 63 characters.
	Name string `json:"name"`
	// Image is the container image, required.
	Image string `json:"image"`
	// WorkloadKind is deployment (a long-running service, the default when empty) or job.
	WorkloadKind string `json:"workloadKind,omitempty"`
	// RuntimeNamespace overrides the namespace of the runtime profile and kubeconfig.
	RuntimeNamespace string `json:"runtimeNamespace,omitempty"`
	// Entrypoint replaces the image's ENTRYPOINT (the container's command).
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Command is passed to the entrypoint (the container's args).
	Command []string `json:"command,omitempty"`
	// WorkDir is the container's working directory.
	WorkDir string `json:"workDir,omitempty"`
	// Env is injected sorted by key. Its values are stored in plain text in
	// the state database and the workload's gobrave.dev/spec annotation: put
	// secrets in EnvSecrets or EnvFromSecrets instead.
	Env map[string]string `json:"env,omitempty"`
	// EnvSecrets are environment variables read from a key of a Secret in
	// the workload's namespace (a secretKeyRef); only the reference is stored.
	EnvSecrets []EnvSecret `json:"envSecrets,omitempty"`
	// EnvFromSecrets are Secrets whose every key becomes an environment
	// variable (envFrom).
	EnvFromSecrets []string `json:"envFromSecrets,omitempty"`
	// CPU in cores (0.5 = 500m), used as limit and request.
	CPU float64 `json:"cpu,omitempty"`
	// Memory in bytes or as a quantity such as 256Mi, used as limit and request.
	Memory Quantity `json:"memory,omitempty"`
	// Volumes are hostPath mounts. The node's / and the container runtime's
	// sockets (and the folders holding them) are refused unless
	// AllowUnsafeHostPath is set.
	Volumes []Volume `json:"volumes,omitempty"`
	// AllowUnsafeHostPath allows hostPath volumes of / and of the container
	// runtime's sockets, which hand the node to the container.
	AllowUnsafeHostPath bool `json:"allowUnsafeHostPath,omitempty"`
	// SecurityProfile is baseline (the default when empty: passes the
	// baseline Pod Security Standard) or restricted (runAsNonRoot, no
	// privilege escalation, all capabilities dropped, seccomp RuntimeDefault:
	// passes the restricted standard).
	SecurityProfile string `json:"securityProfile,omitempty"`
	// User is "uid" or "uid:gid", numeric.
	User string `json:"user,omitempty"`
	// ExposedPort adds a container port (1-65535).
	ExposedPort int32 `json:"exposedPort,omitempty"`
	// ExposeService creates a ClusterIP Service <name>-svc for deployments with an ExposedPort.
	ExposeService bool `json:"exposeService,omitempty"`
	// Labels are merged onto the workload, pod template and service; they
	// cannot replace app or gobrave-workload.
	Labels map[string]string `json:"labels,omitempty"`
	// PullPolicy is Always or IfNotPresent (the default). Never is refused.
	PullPolicy string `json:"pullPolicy,omitempty"`
	// SchedulingConstraints of type node become required node affinity.
	SchedulingConstraints []SchedulingConstraint `json:"schedulingConstraints,omitempty"`
	// ProgressDeadline is a deployment's progressDeadlineSeconds as a
	// duration in whole seconds, such as 90s or 10m ("" leaves the
	// Kubernetes default, 600s): a rollout that makes no progress for so
	// long fails with ProgressDeadlineExceeded.
	ProgressDeadline string `json:"progressDeadline,omitempty"`
}

// Volume is a hostPath mount: Source on the node, Target in the container.
type Volume struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// EnvSecret is an environment variable Name read from Key of the Secret
// named Secret.
type EnvSecret struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	Key    string `json:"key"`
}

// SchedulingConstraint is one node-affinity requirement.
type SchedulingConstraint struct {
	// Type is "node" (the only type).
	Type string `json:"type"`
	// Key is a node label; "hostname" means kubernetes.io/hostname.
	Key string `json:"key"`
	// Operator is In, NotIn, Exists, DoesNotExist, Gt or Lt.
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Quantity is a memory amount: a plain number of bytes or a Kubernetes
// quantity string such as 256Mi. In files it may be written either way.
type Quantity string
