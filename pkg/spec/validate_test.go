package spec

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func validSpec() ContainerSpec {
	return ContainerSpec{Name: "web-api", Image: "nginx:1.27"}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name    string
		edit    func(*ContainerSpec)
		wantErr string
	}{
		{name: "minimal", edit: func(*ContainerSpec) {}},
		{name: "full", edit: func(s *ContainerSpec) {
			s.WorkloadKind = "deployment"
			s.RuntimeNamespace = "ai"
			s.Env = map[string]string{"LOG_LEVEL": "debug", "my.env-name": "x"}
			s.CPU = 0.5
			s.Memory = "256Mi"
			s.Volumes = []Volume{{Source: "/srv", Target: "/data"}, {Source: "/srv", Target: "/cache"}}
			s.User = "1000:2000"
			s.ExposedPort = 8080
			s.ExposeService = true
			s.Labels = map[string]string{"team": "platform", "example.com/tier": ""}
			s.PullPolicy = "Always"
			s.ProgressDeadline = "90s"
			s.SchedulingConstraints = []SchedulingConstraint{
				{Type: "node", Key: "disktype", Operator: "In", Values: []string{"ssd"}},
				{Key: "hostname", Operator: "NotIn", Values: []string{"node-1"}},
				{Key: "gpu", Operator: "Exists"},
				{Key: "spot", Operator: "DoesNotExist"},
				{Key: "cores", Operator: "Gt", Values: []string{"4"}},
				{Key: "cores", Operator: "Lt", Values: []string{"-1"}},
			}
		}},
		{name: "job", edit: func(s *ContainerSpec) { s.WorkloadKind = "job"; s.ExposedPort = 80 }},
		{name: "memory in plain bytes", edit: func(s *ContainerSpec) { s.Memory = "268435456" }},
		{name: "pull policy Never passes validation", edit: func(s *ContainerSpec) { s.PullPolicy = "Never" }},
		{name: "name 63 characters", edit: func(s *ContainerSpec) { s.Name = long[:63] }},
		{name: "user uid only", edit: func(s *ContainerSpec) { s.User = "0" }},
		{name: "restricted profile", edit: func(s *ContainerSpec) { s.SecurityProfile = "restricted"; s.User = "1000" }},
		{name: "baseline profile", edit: func(s *ContainerSpec) { s.SecurityProfile = "baseline" }},
		{name: "read-only volume", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/srv", Target: "/srv", ReadOnly: true}} }},
		{name: "a folder beside the sockets", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/var/run-data", Target: "/d"}} }},
		{name: "unsafe hostPath allowed", edit: func(s *ContainerSpec) {
			s.Volumes = []Volume{{Source: "/", Target: "/host"}, {Source: "/var/run/docker.sock", Target: "/var/run/docker.sock"}}
			s.AllowUnsafeHostPath = true
		}},
		{name: "secrets", edit: func(s *ContainerSpec) {
			s.Env = map[string]string{"MODE": "x"}
			s.EnvSecrets = []EnvSecret{{Name: "DB_PASSWORD", Secret: "db-creds", Key: "password"}, {Name: "TLS", Secret: "certs.v1", Key: "tls.key"}}
			s.EnvFromSecrets = []string{"app-env", "more"}
		}},
		{name: "hostPath /", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/", Target: "/host"}} },
			wantErr: `volumes[0].source "/": refused, it is the node's whole filesystem; mount a narrower folder, or pass --allow-unsafe-host-path`},
		{name: "hostPath / spelled otherwise", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/srv/..//", Target: "/host"}} },
			wantErr: `volumes[0].source "/srv/..//": refused, it is the node's whole filesystem`},
		{name: "docker socket", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/var/run/docker.sock", Target: "/s"}} },
			wantErr: `volumes[0].source "/var/run/docker.sock": refused, it is a container runtime's socket`},
		{name: "containerd socket", edit: func(s *ContainerSpec) {
			s.Volumes = []Volume{{Source: "/run/containerd/containerd.sock", Target: "/s"}}
		},
			wantErr: `refused, it is a container runtime's socket`},
		{name: "crio socket", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/var/run/crio/crio.sock", Target: "/s"}} },
			wantErr: `refused, it is a container runtime's socket`},
		{name: "folder of a socket", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/var/run", Target: "/s"}} },
			wantErr: `volumes[0].source "/var/run": refused, it holds the container runtime socket /var/run/docker.sock`},
		{name: "restricted with a hostPath", edit: func(s *ContainerSpec) {
			s.SecurityProfile = "restricted"
			s.Volumes = []Volume{{Source: "/srv", Target: "/srv"}}
		}, wantErr: "volumes[0]: securityProfile restricted forbids hostPath volumes"},
		{name: "restricted as root", edit: func(s *ContainerSpec) { s.SecurityProfile = "restricted"; s.User = "0:0" },
			wantErr: `user "0:0": securityProfile restricted runs as non-root`},
		{name: "unknown profile", edit: func(s *ContainerSpec) { s.SecurityProfile = "privileged" },
			wantErr: `securityProfile "privileged": must be baseline (the default) or restricted`},
		{name: "env secret bad name", edit: func(s *ContainerSpec) { s.EnvSecrets = []EnvSecret{{Name: "1X", Secret: "s", Key: "k"}} },
			wantErr: `envSecrets[0].name "1X"`},
		{name: "env secret twice", edit: func(s *ContainerSpec) {
			s.Env = map[string]string{"PW": "x"}
			s.EnvSecrets = []EnvSecret{{Name: "PW", Secret: "s", Key: "k"}}
		}, wantErr: `envSecrets[0].name "PW": already set by env`},
		{name: "env secret bad secret", edit: func(s *ContainerSpec) { s.EnvSecrets = []EnvSecret{{Name: "X", Secret: "Bad_Name", Key: "k"}} },
			wantErr: `envSecrets[0].secret "Bad_Name": must be a Secret name`},
		{name: "env secret bad key", edit: func(s *ContainerSpec) { s.EnvSecrets = []EnvSecret{{Name: "X", Secret: "s", Key: "a/b"}} },
			wantErr: `envSecrets[0].key "a/b"`},
		{name: "env secret missing parts", edit: func(s *ContainerSpec) { s.EnvSecrets = []EnvSecret{{}} },
			wantErr: `envSecrets[0].name: required`},
		{name: "env from bad secret", edit: func(s *ContainerSpec) { s.EnvFromSecrets = []string{"UPPER"} },
			wantErr: `envFromSecrets[0] "UPPER": must be a Secret name`},
		{name: "env from twice", edit: func(s *ContainerSpec) { s.EnvFromSecrets = []string{"a", "a"} },
			wantErr: `envFromSecrets[1] "a": already listed as envFromSecrets[0]`},

		{name: "name missing", edit: func(s *ContainerSpec) { s.Name = "" }, wantErr: "name: required"},
		{name: "name upper case and underscore", edit: func(s *ContainerSpec) { s.Name = "Web_API" },
			wantErr: `name "Web_API": must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)`},
		{name: "name too long", edit: func(s *ContainerSpec) { s.Name = long }, wantErr: `name "` + long + `": must be a DNS-1123 label`},
		{name: "name ends with dash", edit: func(s *ContainerSpec) { s.Name = "web-" }, wantErr: `name "web-"`},
		{name: "image missing", edit: func(s *ContainerSpec) { s.Image = "" }, wantErr: "image: required"},
		{name: "image with whitespace", edit: func(s *ContainerSpec) { s.Image = "nginx latest" }, wantErr: `image "nginx latest": must not contain whitespace`},
		{name: "workload kind", edit: func(s *ContainerSpec) { s.WorkloadKind = "cronjob" }, wantErr: `workloadKind "cronjob": must be deployment or job`},
		{name: "workload kind is case-sensitive", edit: func(s *ContainerSpec) { s.WorkloadKind = "Job" }, wantErr: `workloadKind "Job"`},
		{name: "runtime namespace", edit: func(s *ContainerSpec) { s.RuntimeNamespace = "My-NS" }, wantErr: `runtimeNamespace "My-NS": must be a DNS-1123 label`},
		{name: "cpu negative", edit: func(s *ContainerSpec) { s.CPU = -1 }, wantErr: "cpu -1: must be a positive number of cores"},
		{name: "cpu NaN", edit: func(s *ContainerSpec) { s.CPU = math.NaN() }, wantErr: "cpu NaN: must be a finite number"},
		{name: "cpu Inf", edit: func(s *ContainerSpec) { s.CPU = math.Inf(1) }, wantErr: "cpu +Inf: must be a finite number"},
		{name: "cpu below a millicore", edit: func(s *ContainerSpec) { s.CPU = 0.0001 }, wantErr: "cpu 0.0001: must be at least 0.001 cores"},
		{name: "cpu too large", edit: func(s *ContainerSpec) { s.CPU = 1e300 }, wantErr: "cpu 1e+300: too large"},
		{name: "memory not a quantity", edit: func(s *ContainerSpec) { s.Memory = "lots" }, wantErr: `memory "lots": must be bytes or a quantity such as 256Mi`},
		{name: "memory negative", edit: func(s *ContainerSpec) { s.Memory = "-1Gi" }, wantErr: `memory "-1Gi": must be positive`},
		{name: "memory zero", edit: func(s *ContainerSpec) { s.Memory = "0" }, wantErr: `memory "0": must be positive`},
		{name: "port negative", edit: func(s *ContainerSpec) { s.ExposedPort = -1 }, wantErr: "exposedPort -1: must be between 1 and 65535"},
		{name: "port too large", edit: func(s *ContainerSpec) { s.ExposedPort = 65536 }, wantErr: "exposedPort 65536: must be between 1 and 65535"},
		{name: "expose service without port", edit: func(s *ContainerSpec) { s.ExposeService = true }, wantErr: "exposeService: requires exposedPort"},
		{name: "expose service for a job", edit: func(s *ContainerSpec) { s.ExposeService = true; s.ExposedPort = 80; s.WorkloadKind = "job" },
			wantErr: `exposeService: only a deployment can expose a service, not workloadKind "job"`},
		{name: "volume source relative", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "data", Target: "/data"}} },
			wantErr: `volumes[0].source "data": must be an absolute path`},
		{name: "volume target relative", edit: func(s *ContainerSpec) { s.Volumes = []Volume{{Source: "/data", Target: ""}} },
			wantErr: `volumes[0].target "": must be an absolute path`},
		{name: "volume target duplicate", edit: func(s *ContainerSpec) {
			s.Volumes = []Volume{{Source: "/a", Target: "/data"}, {Source: "/b", Target: "/data/"}}
		}, wantErr: `volumes[1].target "/data/": already mounted by volumes[0]`},
		{name: "user name", edit: func(s *ContainerSpec) { s.User = "root" }, wantErr: `user "root": must be a numeric uid or uid:gid`},
		{name: "user negative", edit: func(s *ContainerSpec) { s.User = "-1" }, wantErr: `user "-1"`},
		{name: "user empty gid", edit: func(s *ContainerSpec) { s.User = "1000:" }, wantErr: `user "1000:"`},
		{name: "user overflows int64", edit: func(s *ContainerSpec) { s.User = "99999999999999999999" }, wantErr: `user "99999999999999999999"`},
		{name: "env empty key", edit: func(s *ContainerSpec) { s.Env = map[string]string{"": "x"} }, wantErr: "env: a variable has an empty name"},
		{name: "env bad key", edit: func(s *ContainerSpec) { s.Env = map[string]string{"1 BAD": "x"} }, wantErr: `env "1 BAD": a valid environment variable name`},
		{name: "label app reserved", edit: func(s *ContainerSpec) { s.Labels = map[string]string{"app": "x"} }, wantErr: `labels "app": reserved by gobrave, cannot replace it`},
		{name: "label gobrave-workload reserved", edit: func(s *ContainerSpec) { s.Labels = map[string]string{"gobrave-workload": "x"} },
			wantErr: `labels "gobrave-workload": reserved`},
		{name: "label gobrave.dev/kind reserved", edit: func(s *ContainerSpec) { s.Labels = map[string]string{"gobrave.dev/kind": "deployment"} },
			wantErr: `labels "gobrave.dev/kind": reserved`},
		{name: "label bad key", edit: func(s *ContainerSpec) { s.Labels = map[string]string{"bad key": "x"} }, wantErr: `labels key "bad key"`},
		{name: "label bad value", edit: func(s *ContainerSpec) { s.Labels = map[string]string{"team": "a b"} }, wantErr: `labels "team" value "a b"`},
		{name: "pull policy", edit: func(s *ContainerSpec) { s.PullPolicy = "always" }, wantErr: `pullPolicy "always": must be Always or IfNotPresent`},
		{name: "progress deadline in minutes", edit: func(s *ContainerSpec) { s.ProgressDeadline = "10m" }},
		{name: "progress deadline not a duration", edit: func(s *ContainerSpec) { s.ProgressDeadline = "soon" },
			wantErr: `progressDeadline "soon": not a duration; use whole seconds such as 90s or 10m`},
		{name: "progress deadline bare number", edit: func(s *ContainerSpec) { s.ProgressDeadline = "30" },
			wantErr: `progressDeadline "30": not a duration`},
		{name: "progress deadline zero", edit: func(s *ContainerSpec) { s.ProgressDeadline = "0s" }, wantErr: `progressDeadline "0s": must be positive`},
		{name: "progress deadline negative", edit: func(s *ContainerSpec) { s.ProgressDeadline = "-5s" }, wantErr: `progressDeadline "-5s": must be positive`},
		{name: "progress deadline fraction", edit: func(s *ContainerSpec) { s.ProgressDeadline = "1500ms" },
			wantErr: `progressDeadline "1500ms": must be whole seconds, such as 2s`},
		{name: "progress deadline too long", edit: func(s *ContainerSpec) { s.ProgressDeadline = "1000000h" }, wantErr: `progressDeadline "1000000h": too long`},
		{name: "progress deadline of a job", edit: func(s *ContainerSpec) { s.WorkloadKind = "job"; s.ProgressDeadline = "30s" },
			wantErr: `progressDeadline "30s": only a deployment has a progress deadline, not workloadKind "job"`},
		{name: "constraint type", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Type: "pod", Key: "a", Operator: "Exists"}}
		}, wantErr: `schedulingConstraints[0].type "pod": must be node`},
		{name: "constraint key missing", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Operator: "Exists"}}
		}, wantErr: "schedulingConstraints[0]: key is required"},
		{name: "constraint key invalid", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "-bad", Operator: "Exists"}}
		}, wantErr: `schedulingConstraints[0]: key "-bad"`},
		{name: "constraint operator missing", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a"}}
		}, wantErr: "operator is required"},
		{name: "constraint operator unknown", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a", Operator: "in", Values: []string{"x"}}}
		}, wantErr: `operator "in": must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt`},
		{name: "constraint In without values", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a", Operator: "In"}}
		}, wantErr: "operator In needs at least one value"},
		{name: "constraint NotIn without values", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a", Operator: "NotIn"}}
		}, wantErr: "operator NotIn needs at least one value"},
		{name: "constraint Exists with values", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a", Operator: "Exists", Values: []string{"x"}}}
		}, wantErr: "operator Exists takes no values"},
		{name: "constraint DoesNotExist with values", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a", Operator: "DoesNotExist", Values: []string{"x"}}}
		}, wantErr: "operator DoesNotExist takes no values"},
		{name: "constraint Gt two values", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a", Operator: "Gt", Values: []string{"1", "2"}}}
		}, wantErr: "operator Gt needs exactly one integer value"},
		{name: "constraint Lt not an integer", edit: func(s *ContainerSpec) {
			s.SchedulingConstraints = []SchedulingConstraint{{Key: "a", Operator: "Lt", Values: []string{"1.5"}}}
		}, wantErr: `operator Lt needs an integer value, got "1.5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.edit(&s)
			err := s.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() error = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() error = %v, want it to contain %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate() error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	s := ContainerSpec{
		Name:        "Web_API",
		CPU:         -2,
		ExposedPort: 70000,
		Labels:      map[string]string{"app": "x"},
		Volumes:     []Volume{{Source: "rel", Target: "/data"}},
	}
	err := s.Validate()
	if err == nil {
		t.Fatal("Validate() error = nil")
	}
	want := []string{
		`name "Web_API": must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)`,
		"image: required, e.g. nginx:1.27",
		"cpu -2: must be a positive number of cores such as 0.5, or 0 to leave it unset",
		"exposedPort 70000: must be between 1 and 65535, or 0 to expose no port",
		`volumes[0].source "rel": must be an absolute path on the node, e.g. /data`,
		`labels "app": reserved by gobrave, cannot replace it; choose another key`,
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("Validate() problems mismatch (-want +got):\n%s", diff)
	}
}

func TestKindAndNormalize(t *testing.T) {
	s := ContainerSpec{Name: "web", SchedulingConstraints: []SchedulingConstraint{{Key: "a", Operator: "Exists"}}}
	if got := s.Kind(); got != "deployment" {
		t.Errorf("Kind() = %q, want deployment", got)
	}
	s.Normalize()
	want := ContainerSpec{
		Name: "web", WorkloadKind: "deployment", PullPolicy: "IfNotPresent",
		SchedulingConstraints: []SchedulingConstraint{{Type: "node", Key: "a", Operator: "Exists"}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Normalize() mismatch (-want +got):\n%s", diff)
	}
	job := ContainerSpec{WorkloadKind: "job", PullPolicy: "Always"}
	job.Normalize()
	if job.Kind() != "job" || job.PullPolicy != "Always" {
		t.Errorf("Normalize() replaced set values: %+v", job)
	}
}

func TestCPUQuantity(t *testing.T) {
	tests := []struct {
		cpu    float64
		want   string
		wantOK bool
	}{
		{cpu: 0.5, want: "500m", wantOK: true},
		{cpu: 2, want: "2", wantOK: true},
		{cpu: 0.25, want: "250m", wantOK: true},
		{cpu: 1.5, want: "1500m", wantOK: true},
		{cpu: 0},
		{cpu: -1},
		{cpu: math.NaN()},
		{cpu: math.Inf(1)},
		{cpu: 0.0001},
	}
	for _, tt := range tests {
		q, ok := ContainerSpec{CPU: tt.cpu}.CPUQuantity()
		got := ""
		if ok {
			got = q.String()
		}
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("CPUQuantity(%v) = %q, %v; want %q, %v", tt.cpu, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestQuantityParse(t *testing.T) {
	tests := []struct {
		in        Quantity
		wantBytes int64
		wantErr   string
	}{
		{in: "268435456", wantBytes: 268435456},
		{in: "256Mi", wantBytes: 256 << 20},
		{in: "1G", wantBytes: 1e9},
		{in: "", wantErr: "memory: empty"},
		{in: "12 MB", wantErr: `memory "12 MB": must be bytes or a quantity`},
	}
	for _, tt := range tests {
		q, err := tt.in.Parse()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Quantity(%q).Parse() error = %v, want it to contain %q and wrap ErrInvalid", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || q.Value() != tt.wantBytes {
			t.Errorf("Quantity(%q).Parse() = %v, %v; want %d bytes", tt.in, q.Value(), err, tt.wantBytes)
		}
	}
}

func TestParseUser(t *testing.T) {
	ptr := func(n int64) *int64 { return &n }
	tests := []struct {
		in      string
		wantUID int64
		wantGID *int64
		wantErr string
	}{
		{in: "1000", wantUID: 1000},
		{in: "0:0", wantUID: 0, wantGID: ptr(0)},
		{in: "1000:2000", wantUID: 1000, wantGID: ptr(2000)},
		{in: "", wantErr: `user ""`},
		{in: "root", wantErr: `user "root": must be a numeric uid or uid:gid, e.g. 1000 or 1000:1000`},
		{in: "+1", wantErr: `user "+1"`},
		{in: "-1", wantErr: `user "-1"`},
		{in: "1:2:3", wantErr: `user "1:2:3"`},
		{in: ":1", wantErr: `user ":1"`},
	}
	for _, tt := range tests {
		uid, gid, err := ParseUser(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseUser(%q) error = %v, want it to contain %q and wrap ErrInvalid", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseUser(%q) error = %v", tt.in, err)
			continue
		}
		if uid != tt.wantUID || !cmp.Equal(gid, tt.wantGID) {
			t.Errorf("ParseUser(%q) = %d, %v; want %d, %v", tt.in, uid, gid, tt.wantUID, tt.wantGID)
		}
	}
}
