package runtimeid

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ID
		wantErr string
	}{
		{name: "deployment", in: "k8s-default|deployment|web-api", want: ID{"k8s", "default", "deployment", "web-api"}},
		{name: "job on k3s", in: "k3s-ai|job|batch-import-001", want: ID{"k3s", "ai", "job", "batch-import-001"}},
		{name: "namespace with dash", in: "k8s-team-a|job|x", want: ID{"k8s", "team-a", "job", "x"}},
		{name: "unknown runtime", in: "docker-default|job|x", wantErr: `unknown runtime "docker"`},
		{name: "no runtime dash", in: "k8s|job|x", wantErr: `first field "k8s" is not <runtime>-<namespace>`},
		{name: "two fields", in: "k8s-default|job", wantErr: "want 3 fields separated by '|', got 2"},
		{name: "four fields", in: "k8s-default|job|a|b", wantErr: "got 4"},
		{name: "empty", in: "", wantErr: "got 1"},
		{name: "empty namespace", in: "k8s-|job|x", wantErr: "empty namespace"},
		{name: "empty kind", in: "k8s-default||x", wantErr: "empty kind"},
		{name: "empty name", in: "k8s-default|job|", wantErr: "empty name"},
		{name: "unknown kind", in: "k8s-default|statefulset|x", wantErr: `unknown kind "statefulset"`},
		{name: "upper-case name", in: "k8s-default|job|Web", wantErr: `name "Web" is not a DNS-1123 label`},
		{name: "bad namespace", in: "k8s-a_b|job|x", wantErr: `namespace "a_b" is not a DNS-1123 label`},
		{name: "name too long", in: "k8s-default|job|" + strings.Repeat("a", 64), wantErr: "is not a DNS-1123 label"},
		{name: "runtime is case sensitive", in: "K8S-default|job|x", wantErr: `unknown runtime "K8S"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				if !strings.Contains(err.Error(), `"`+tt.in+`"`) || !strings.Contains(err.Error(), Format) {
					t.Errorf("error %q must quote the ID and show the expected format", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestKey(t *testing.T) {
	id := ID{"k3s", "ai", "job", "x"}
	if got, want := id.Key(), "job|ai|x"; got != want {
		t.Errorf("Key() = %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"k8s-default|deployment|web-api", "k3s-ai|job|batch-import-001", "k8s-|job|", "||", "k8s-a-b|job|c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("Format(Parse(%q)) = %q", s, id.String())
		}
		again, err := Parse(id.String())
		if err != nil || again != id {
			t.Fatalf("Parse(Format(%#v)) = %#v, %v", id, again, err)
		}
	})
}
