package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Config
		wantErr string // after "<path>: "
	}{
		{
			name: "full",
			in: `defaultRuntime: k3s
runtimes:
  k8s: {context: "", namespace: default}   # current context
  k3s:
    context: k3s-default
    namespace: ai
`,
			want: Config{DefaultRuntime: "k3s", Runtimes: map[string]Profile{
				"k8s": {Namespace: "default"},
				"k3s": {Context: "k3s-default", Namespace: "ai"},
			}},
		},
		{name: "empty file", in: "", want: Config{}},
		{name: "only comments", in: "# nothing yet\n", want: Config{}},
		{name: "null document", in: "---\n", want: Config{}},
		{name: "null runtimes and profile", in: "runtimes:\n  k8s:\n", want: Config{Runtimes: map[string]Profile{"k8s": {}}}},
		{name: "empty runtimes", in: "defaultRuntime: k8s\nruntimes: {}\n", want: Config{DefaultRuntime: "k8s"}},
		{name: "anchors", in: "runtimes:\n  k8s: &p {namespace: ai}\n  k3s: *p\n",
			want: Config{Runtimes: map[string]Profile{"k8s": {Namespace: "ai"}, "k3s": {Namespace: "ai"}}}},
		{
			name:    "unknown top-level key",
			in:      "defaultRuntime: k8s\nruntime: k3s\n",
			wantErr: `line 2: unknown field "runtime" (use defaultRuntime or runtimes)`,
		},
		{
			name:    "unknown runtime",
			in:      "defaultRuntime: k8s\nruntimes:\n  k8s: {}\n\n  docker: {namespace: default}\n",
			wantErr: `line 5: runtimes.docker: unknown runtime "docker" (use k8s or k3s)`,
		},
		{
			name:    "unknown profile key",
			in:      "runtimes:\n  k3s:\n    context: k3s-default\n    namspace: ai\n",
			wantErr: `line 4: unknown field "runtimes.k3s.namspace" (use context or namespace)`,
		},
		{
			name:    "invalid default runtime",
			in:      "# comment\ndefaultRuntime: docker\n",
			wantErr: `line 2: defaultRuntime "docker": unknown runtime (use k8s or k3s)`,
		},
		{
			name:    "invalid namespace",
			in:      "runtimes:\n  k3s: {context: k3s-default, namespace: AI_Team}\n",
			wantErr: `line 2: runtimes.k3s.namespace "AI_Team": must be a DNS-1123 label`,
		},
		{
			name:    "default runtime of the wrong type",
			in:      "defaultRuntime: [k8s]\n",
			wantErr: `line 1: defaultRuntime: want a string, got a list`,
		},
		{
			name:    "runtimes is a list",
			in:      "runtimes:\n  - k8s\n",
			wantErr: `line 2: runtimes: want a mapping, got a list`,
		},
		{
			name:    "profile is a string",
			in:      "runtimes:\n  k8s: default\n",
			wantErr: `line 2: runtimes.k8s: want a mapping, got "default"`,
		},
		{
			name:    "namespace is a number",
			in:      "runtimes:\n  k8s:\n    namespace: 123\n",
			wantErr: `line 3: runtimes.k8s.namespace: want a string, got "123" (quote it if you mean text)`,
		},
		{
			name:    "context is a boolean",
			in:      "runtimes:\n  k8s: {context: true}\n",
			wantErr: `line 2: runtimes.k8s.context: want a string, got "true"`,
		},
		{
			name:    "root is a list",
			in:      "- k8s\n",
			wantErr: `line 1: config: want a mapping, got a list`,
		},
		{
			name:    "duplicate key",
			in:      "runtimes:\n  k8s: {}\n  k8s: {}\n",
			wantErr: `line 3: runtimes.k8s: duplicate key, already set at line 2`,
		},
		{
			name:    "several documents",
			in:      "defaultRuntime: k8s\n---\ndefaultRuntime: k3s\n",
			wantErr: `line 2: found a second YAML document`,
		},
		{
			name:    "bad YAML",
			in:      "defaultRuntime: k8s\nruntimes:\n  k8s: a: b\n",
			wantErr: `line 3: mapping values are not allowed in this context`,
		},
		{
			name: "every problem is reported",
			in:   "defaultRuntime: docker\nruntimes:\n  podman: {}\n  k3s: {namespace: Bad}\nextra: 1\n",
			wantErr: `line 1: defaultRuntime "docker": unknown runtime (use k8s or k3s)` + "\n" +
				"%PATH%: line 3: runtimes.podman: unknown runtime \"podman\" (use k8s or k3s)\n" +
				"%PATH%: line 4: runtimes.k3s.namespace \"Bad\": must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)\n" +
				`%PATH%: line 5: unknown field "extra" (use defaultRuntime or runtimes)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.in)
			got, err := Load(path)
			if tt.wantErr != "" {
				want := path + ": " + strings.ReplaceAll(tt.wantErr, "%PATH%", path)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Load() error = %v, want it to contain %q", err, want)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("Load() error %v does not wrap ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadExampleFile(t *testing.T) {
	got, err := Load("../../docs/config.example.yaml")
	if err != nil {
		t.Fatalf("Load(example) error = %v", err)
	}
	want := Config{DefaultRuntime: "k8s", Runtimes: map[string]Profile{
		"k8s": {},
		"k3s": {Context: "k3s-default", Namespace: "ai"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(example) mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadOrDefault(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	good := writeFile(t, "defaultRuntime: k3s\n")
	bad := writeFile(t, "defaultRuntime: docker\n")
	tests := []struct {
		name         string
		path         string
		explicit     bool
		want         Config
		wantErr      string
		wantNotExist bool
	}{
		{name: "missing default path", path: missing, want: Default()},
		{name: "no path at all", path: "", want: Default()},
		{name: "missing explicit path", path: missing, explicit: true, wantErr: missing, wantNotExist: true},
		{name: "existing file", path: good, want: Config{DefaultRuntime: "k3s"}},
		{name: "invalid file is an error even when implicit", path: bad, wantErr: `defaultRuntime "docker"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadOrDefault(tt.path, tt.explicit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadOrDefault() error = %v, want it to contain %q", err, tt.wantErr)
				}
				if tt.wantNotExist && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("LoadOrDefault() error %v is not fs.ErrNotExist", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadOrDefault() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LoadOrDefault() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigPath(t *testing.T) {
	tests := []struct {
		name         string
		flag         string
		env          map[string]string
		home         string
		want         string
		wantExplicit bool
	}{
		{name: "flag wins", flag: "/etc/gb.yaml", env: map[string]string{EnvConfig: "/env.yaml", EnvXDGConfigHome: "/xdg"}, home: "/home/u",
			want: "/etc/gb.yaml", wantExplicit: true},
		{name: "GOBRAVE_CONFIG", env: map[string]string{EnvConfig: "/env.yaml", EnvXDGConfigHome: "/xdg"}, home: "/home/u",
			want: "/env.yaml", wantExplicit: true},
		{name: "XDG_CONFIG_HOME", env: map[string]string{EnvXDGConfigHome: "/xdg"}, home: "/home/u", want: "/xdg/gobrave/config.yaml"},
		{name: "relative XDG_CONFIG_HOME is ignored", env: map[string]string{EnvXDGConfigHome: "xdg"}, home: "/home/u",
			want: "/home/u/.config/gobrave/config.yaml"},
		{name: "home", home: "/home/u", want: "/home/u/.config/gobrave/config.yaml"},
		{name: "nothing known", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, explicit := ConfigPath(tt.flag, env(tt.env), tt.home)
			if got != tt.want || explicit != tt.wantExplicit {
				t.Errorf("ConfigPath() = %q, %v; want %q, %v", got, explicit, tt.want, tt.wantExplicit)
			}
		})
	}
}

func TestStatePath(t *testing.T) {
	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string
	}{
		{name: "flag wins", flag: "/tmp/s.db", env: map[string]string{EnvHome: "/gb", EnvXDGDataHome: "/xdg"}, want: "/tmp/s.db"},
		{name: "GOBRAVE_HOME", env: map[string]string{EnvHome: "/gb", EnvXDGDataHome: "/xdg"}, want: "/gb/state.db"},
		{name: "XDG_DATA_HOME", env: map[string]string{EnvXDGDataHome: "/xdg"}, want: "/xdg/gobrave/state.db"},
		{name: "home", want: "/home/u/.local/share/gobrave/state.db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := StatePath(tt.flag, env(tt.env), "/home/u"); got != tt.want || err != nil {
				t.Errorf("StatePath() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// Without an absolute home, only an explicit place will do: never a
	// path relative to the working folder.
	for _, home := range []string{"", "relative/home", "."} {
		got, err := StatePath("", env(nil), home)
		if !errors.Is(err, ErrNoHome) || got != "" || !strings.Contains(err.Error(), "GOBRAVE_HOME") {
			t.Errorf("StatePath with home %q = %q, %v; want ErrNoHome saying what to set", home, got, err)
		}
		if got, err := StatePath("", env(map[string]string{EnvHome: "/gb"}), home); got != "/gb/state.db" || err != nil {
			t.Errorf("StatePath with GOBRAVE_HOME and home %q = %q, %v", home, got, err)
		}
	}
}

func TestRuntime(t *testing.T) {
	tests := []struct {
		name    string
		config  Config
		flag    string
		want    string
		wantErr string
	}{
		{name: "nothing set", want: "k8s"},
		{name: "default runtime", config: Config{DefaultRuntime: "k3s"}, want: "k3s"},
		{name: "flag wins", config: Config{DefaultRuntime: "k3s"}, flag: "k8s", want: "k8s"},
		{name: "bad flag", flag: "docker", wantErr: `--runtime "docker": unknown runtime (use k8s or k3s)`},
		{name: "bad default runtime", config: Config{DefaultRuntime: "K8S"}, wantErr: `defaultRuntime "K8S": unknown runtime`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.config.Runtime(tt.flag)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Runtime() error = %v, want it to contain %q and wrap ErrInvalid", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Runtime() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestProfileAndRuntimeNames(t *testing.T) {
	c := Config{Runtimes: map[string]Profile{"k3s": {Context: "k3s-default", Namespace: "ai"}, "k8s": {}}}
	if diff := cmp.Diff(Profile{Context: "k3s-default", Namespace: "ai"}, c.Profile("k3s")); diff != "" {
		t.Errorf("Profile(k3s) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Profile{}, Config{}.Profile("k8s")); diff != "" {
		t.Errorf("Profile of an empty config mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"k3s", "k8s"}, c.ConfiguredRuntimes()); diff != "" {
		t.Errorf("ConfiguredRuntimes() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"k3s", "k8s"}, KnownRuntimes()); diff != "" {
		t.Errorf("KnownRuntimes() mismatch (-want +got):\n%s", diff)
	}
}
