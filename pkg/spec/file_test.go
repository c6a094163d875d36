package spec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ContainerSpec
		wantErr string
	}{
		{
			name: "security profile, read-only volume, secrets",
			in: "name: web\nimage: nginx\nsecurityProfile: restricted\nallowUnsafeHostPath: true\n" +
				"volumes:\n  - {source: /srv, target: /srv, readOnly: true}\n" +
				"envSecrets:\n  - {name: PW, secret: db, key: pw}\nenvFromSecrets: [app-env]\n",
			want: ContainerSpec{Name: "web", Image: "nginx", SecurityProfile: "restricted", AllowUnsafeHostPath: true,
				Volumes:    []Volume{{Source: "/srv", Target: "/srv", ReadOnly: true}},
				EnvSecrets: []EnvSecret{{Name: "PW", Secret: "db", Key: "pw"}}, EnvFromSecrets: []string{"app-env"}},
		},
		{
			name:    "envSecrets of the wrong shape",
			in:      "name: web\nimage: nginx\nenvSecrets: [PW=db/pw]\n",
			wantErr: "line 3: envSecrets[0]: want a mapping {name, secret, key}",
		},
		{
			name:    "an unknown field of an envSecret",
			in:      "name: web\nimage: nginx\nenvSecrets:\n  - {name: PW, secret: db, key: pw, value: x}\n",
			wantErr: `unknown field "envSecrets[0].value"`,
		},
		{
			name: "memory as a number of bytes",
			in:   "name: web\nimage: nginx\nmemory: 268435456\n",
			want: ContainerSpec{Name: "web", Image: "nginx", Memory: "268435456"},
		},
		{
			name: "memory as a quantity string",
			in:   "name: web\nimage: nginx\nmemory: 256Mi\ncpu: 0.25\n",
			want: ContainerSpec{Name: "web", Image: "nginx", Memory: "256Mi", CPU: 0.25},
		},
		{
			name: "memory null is unset",
			in:   "name: web\nmemory: null\n",
			want: ContainerSpec{Name: "web"},
		},
		{
			name: "JSON",
			in:   `{"name": "web", "image": "nginx", "exposedPort": 8080, "env": {"A": "1"}, "memory": 1024}`,
			want: ContainerSpec{Name: "web", Image: "nginx", ExposedPort: 8080, Env: map[string]string{"A": "1"}, Memory: "1024"},
		},
		{
			name: "scalars are read as strings in string fields",
			in:   "name: web\nenv:\n  PORT: 8080\n  DEBUG: true\n",
			want: ContainerSpec{Name: "web", Env: map[string]string{"PORT": "8080", "DEBUG": "true"}},
		},
		{
			name: "empty lists become nil",
			in:   "name: web\ncommand: []\nenv: {}\n",
			want: ContainerSpec{Name: "web"},
		},
		{
			name:    "unknown field with line",
			in:      "name: web\n\nimage: nginx\nimagee: nginx\n",
			wantErr: `line 4: unknown field "imagee"`,
		},
		{
			name:    "unknown nested field names its path",
			in:      "name: web\nvolumes:\n  - source: /a\n    targt: /b\n",
			wantErr: `line 4: unknown field "volumes[0].targt"`,
		},
		{
			name:    "wrong type names the field",
			in:      "name: web\nimage: [nginx]\n",
			wantErr: `line 2: image: want a string, got a list`,
		},
		{
			name:    "port overflows int32",
			in:      "name: web\nexposedPort: 99999999999\n",
			wantErr: "line 2: exposedPort: want a whole number",
		},
		{
			name:    "cpu as a string",
			in:      "cpu: '0.5'\n",
			wantErr: `line 1: cpu: want a number, got a string "0.5"`,
		},
		{
			name:    "cpu nan",
			in:      "cpu: .nan\n",
			wantErr: "line 1: cpu: want a finite number of cores",
		},
		{
			name:    "memory as a boolean",
			in:      "name: web\nmemory: true\n",
			wantErr: `line 2: memory: want bytes or a quantity such as 256Mi, got "true"`,
		},
		{
			name:    "memory as a list",
			in:      "memory: [1]\n",
			wantErr: `line 1: memory: want bytes or a quantity such as 256Mi, got a list`,
		},
		{
			name:    "several type errors at once",
			in:      "name: [a]\nimage: {b: c}\n",
			wantErr: "line 1: name: want a string, got a list\nline 2: image: want a string, got a mapping",
		},
		{
			name:    "duplicate key",
			in:      "name: a\nname: b\n",
			wantErr: `line 2: name: mapping key "name" already defined at line 1`,
		},
		{
			name:    "bad YAML",
			in:      "name: web\n  image: nginx\n",
			wantErr: "line 2: mapping values are not allowed in this context",
		},
		{
			name:    "bad YAML in a later document",
			in:      "name: web\n---\n[\n",
			wantErr: "line 3",
		},
		{
			name:    "empty",
			in:      "",
			wantErr: "spec is empty",
		},
		{
			name:    "only a comment",
			in:      "# nothing here\n",
			wantErr: "spec is empty",
		},
		{
			name:    "only a document marker",
			in:      "---\n",
			wantErr: "spec is empty",
		},
		{
			name:    "several documents",
			in:      "name: a\n---\nname: b\n",
			wantErr: "line 2: found a second YAML document; put one spec per file",
		},
		{
			name:    "a list, not a mapping",
			in:      "- name: web\n",
			wantErr: "line 1: the spec must be a mapping of fields such as \"name: web\", not a list",
		},
		{
			name:    "a scalar, not a mapping",
			in:      "web\n",
			wantErr: `not "web"`,
		},
		{
			name:    "control character",
			in:      "name: web\ncommand: [\"a\\x7f\"]\n",
			wantErr: "command[0]: control character U+007F is not allowed; remove it",
		},
		{
			name:    "control character in an env value",
			in:      "env: {A: \"\\u0085\"}\n",
			wantErr: `env "A": control character U+0085 is not allowed`,
		},
		{
			name:    "merge key as an env name",
			in:      "env: {\"<<\": x}\n",
			wantErr: `env: key "<<" is a YAML merge key, not a name`,
		},
		{
			name: "tabs and line breaks are text",
			in:   "name: web\nenv: {CERT: \"a\\tb\\r\\nc\"}\n",
			want: ContainerSpec{Name: "web", Env: map[string]string{"CERT": "a\tb\r\nc"}},
		},
		{
			name:    "binary that is not UTF-8",
			in:      "name: !!binary /w==\n",
			wantErr: "name: not valid UTF-8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want it to contain %q", err, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("Parse() error %v does not wrap ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		want    ContainerSpec
		wantErr string
	}{
		{
			name: "full YAML example",
			path: "testdata/web.yaml",
			want: ContainerSpec{
				Name:             "web-api",
				Image:            "nginx:1.27",
				WorkloadKind:     "deployment",
				RuntimeNamespace: "ai",
				Entrypoint:       []string{"/docker-entrypoint.sh"},
				Command:          []string{"nginx", "-g", "daemon off;"},
				WorkDir:          "/usr/share/nginx/html",
				Env:              map[string]string{"LOG_LEVEL": "debug", "PORT": "8080"},
				CPU:              0.5,
				Memory:           "268435456",
				Volumes:          []Volume{{Source: "/srv/web", Target: "/usr/share/nginx/html"}},
				User:             "1000:1000",
				ExposedPort:      80,
				ExposeService:    true,
				Labels:           map[string]string{"team": "platform"},
				PullPolicy:       "IfNotPresent",
				SchedulingConstraints: []SchedulingConstraint{
					{Type: "node", Key: "disktype", Operator: "In", Values: []string{"ssd", "nvme"}},
					{Key: "hostname", Operator: "Exists"},
				},
			},
		},
		{
			name: "JSON example",
			path: "testdata/job.json",
			want: ContainerSpec{
				Name: "batch-import-001", Image: "busybox:1.36", WorkloadKind: "job",
				Command: []string{"sh", "-c", "echo done"}, Memory: "256Mi", CPU: 2,
			},
		},
		{
			name:    "unknown field names the file and the line",
			path:    "testdata/unknown-field.yaml",
			wantErr: `testdata/unknown-field.yaml: line 3: unknown field "imagee"`,
		},
		{
			name:    "missing file",
			path:    "testdata/missing.yaml",
			wantErr: "testdata/missing.yaml",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadFile(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadFile() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadFile() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LoadFile() mismatch (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("example %s does not validate: %v", tt.path, err)
			}
		})
	}
}

func TestLoadFileEveryErrorNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte("name: [a]\nimage: [b]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path)
	if err == nil {
		t.Fatal("LoadFile() error = nil")
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, path+": line ") {
			t.Errorf("error line %q does not start with %q", line, path+": line ")
		}
	}
}

// TestFileSpecMirrorsContainerSpec keeps the yaml-tagged mirror used for
// strict decoding in step with ContainerSpec's json tags.
func TestFileSpecMirrorsContainerSpec(t *testing.T) {
	pairs := []struct{ public, file reflect.Type }{
		{reflect.TypeFor[ContainerSpec](), reflect.TypeFor[fileSpec]()},
		{reflect.TypeFor[Volume](), reflect.TypeFor[fileVolume]()},
		{reflect.TypeFor[EnvSecret](), reflect.TypeFor[fileEnvSecret]()},
		{reflect.TypeFor[SchedulingConstraint](), reflect.TypeFor[fileConstraint]()},
	}
	for _, p := range pairs {
		if p.public.NumField() != p.file.NumField() {
			t.Fatalf("%s has %d fields, %s has %d", p.public, p.public.NumField(), p.file, p.file.NumField())
		}
		for i := range p.public.NumField() {
			pf, ff := p.public.Field(i), p.file.Field(i)
			jsonName, _, _ := strings.Cut(pf.Tag.Get("json"), ",")
			if pf.Name != ff.Name || jsonName != ff.Tag.Get("yaml") {
				t.Errorf("%s.%s (json %q) does not match %s.%s (yaml %q)", p.public, pf.Name, jsonName, p.file, ff.Name, ff.Tag.Get("yaml"))
			}
		}
	}
}

func TestQuantityUnmarshalJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Quantity
		wantErr string
	}{
		{name: "number", in: `{"memory": 1048576}`, want: "1048576"},
		{name: "string", in: `{"memory": "1Gi"}`, want: "1Gi"},
		{name: "null", in: `{"memory": null}`, want: ""},
		{name: "boolean", in: `{"memory": true}`, wantErr: "want bytes or a quantity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s ContainerSpec
			err := yaml.Unmarshal([]byte(tt.in), &s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Unmarshal() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, s.Memory); diff != "" {
				t.Errorf("Memory mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/web.yaml", "testdata/job.json", "testdata/unknown-field.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse() error %v does not wrap ErrInvalid", err)
			}
			return
		}
		_ = s.Validate() // must not panic
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", s, err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(spec)) error = %v\nmarshalled:\n%s", err, out)
		}
		if diff := cmp.Diff(s, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip mismatch (-first +second):\n%s\nmarshalled:\n%s", diff, out)
		}
	})
}
