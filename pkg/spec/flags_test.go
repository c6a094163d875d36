package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKeyValue(t *testing.T) {
	tests := []struct {
		name    string
		flag    string
		in      string
		wantK   string
		wantV   string
		wantErr string
	}{
		{name: "simple", flag: "env", in: "FOO=bar", wantK: "FOO", wantV: "bar"},
		{name: "value with equals", flag: "env", in: "DSN=a=b;c=d", wantK: "DSN", wantV: "a=b;c=d"},
		{name: "empty value", flag: "label", in: "tier=", wantK: "tier", wantV: ""},
		{name: "no equals", flag: "env", in: "FOO", wantErr: `--env "FOO": must be KEY=VALUE with a non-empty KEY, e.g. --env FOO=bar`},
		{name: "empty key", flag: "--label", in: "=x", wantErr: `--label "=x": must be KEY=VALUE`},
		{name: "empty", flag: "env", in: "", wantErr: `--env "": must be KEY=VALUE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, v, err := ParseKeyValue(tt.flag, tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseKeyValue() error = %v, want it to contain %q and wrap ErrInvalid", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeyValue() error = %v", err)
			}
			if diff := cmp.Diff([]string{tt.wantK, tt.wantV}, []string{k, v}); diff != "" {
				t.Errorf("ParseKeyValue() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseVolume(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Volume
		wantErr string
	}{
		{name: "good", in: "/srv/data:/data", want: Volume{Source: "/srv/data", Target: "/data"}},
		{name: "no colon", in: "/data", wantErr: `--volume "/data": must be SRC:DST`},
		{name: "empty source", in: ":/data", wantErr: `--volume ":/data"`},
		{name: "empty target", in: "/data:", wantErr: `--volume "/data:"`},
		{name: "read-only", in: "/a:/b:ro", want: Volume{Source: "/a", Target: "/b", ReadOnly: true}},
		{name: "read-write", in: "/a:/b:rw", want: Volume{Source: "/a", Target: "/b"}},
		{name: "unknown mode", in: "/a:/b:rx", wantErr: `--volume "/a:/b:rx": unknown mode "rx"`},
		{name: "too many colons", in: "/a:/b:ro:x", wantErr: `--volume "/a:/b:ro:x": must be SRC:DST`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVolume(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseVolume() error = %v, want it to contain %q and wrap ErrInvalid", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseVolume() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseVolume() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConstraint(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    SchedulingConstraint
		wantErr string
	}{
		{name: "In with two values", in: "disktype In ssd,nvme",
			want: SchedulingConstraint{Type: "node", Key: "disktype", Operator: "In", Values: []string{"ssd", "nvme"}}},
		{name: "hostname", in: "hostname In node-1",
			want: SchedulingConstraint{Type: "node", Key: "hostname", Operator: "In", Values: []string{"node-1"}}},
		{name: "Exists", in: "gpu Exists", want: SchedulingConstraint{Type: "node", Key: "gpu", Operator: "Exists"}},
		{name: "Gt", in: "cores Gt 4", want: SchedulingConstraint{Type: "node", Key: "cores", Operator: "Gt", Values: []string{"4"}}},
		{name: "bracketed list with spaces", in: "  zone  NotIn [a, b] ",
			want: SchedulingConstraint{Type: "node", Key: "zone", Operator: "NotIn", Values: []string{"a", "b"}}},
		{name: "operator case-insensitive", in: "spot doesnotexist",
			want: SchedulingConstraint{Type: "node", Key: "spot", Operator: "DoesNotExist"}},
		{name: "prefixed key", in: "topology.kubernetes.io/zone in eu-1",
			want: SchedulingConstraint{Type: "node", Key: "topology.kubernetes.io/zone", Operator: "In", Values: []string{"eu-1"}}},
		{name: "empty", in: "", wantErr: `--constraint "": must be 'KEY OP [V1,V2]'`},
		{name: "key only", in: "disktype", wantErr: `--constraint "disktype": must be 'KEY OP [V1,V2]'`},
		{name: "unknown operator", in: "disktype Is ssd", wantErr: `--constraint "disktype Is ssd": unknown operator "Is", use one of In, NotIn, Exists, DoesNotExist, Gt, Lt`},
		{name: "In without values", in: "disktype In", wantErr: "operator In needs at least one value"},
		{name: "In with empty brackets", in: "disktype In []", wantErr: "operator In needs at least one value"},
		{name: "Exists with a value", in: "gpu Exists yes", wantErr: "operator Exists takes no values"},
		{name: "Gt two values", in: "cores Gt 4,8", wantErr: "operator Gt needs exactly one integer value"},
		{name: "Lt not an integer", in: "cores Lt many", wantErr: `operator Lt needs an integer value, got "many"`},
		{name: "empty list element", in: "disktype In ssd,,nvme", wantErr: "empty value in the list"},
		{name: "unbalanced bracket", in: "disktype In [ssd", wantErr: "unbalanced brackets"},
		{name: "invalid key", in: "bad/key/x Exists", wantErr: `key "bad/key/x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConstraint(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseConstraint() error = %v, want it to contain %q and wrap ErrInvalid", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConstraint() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseConstraint() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEnvSecret(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    EnvSecret
		wantErr string
	}{
		{name: "good", in: "DB_PASSWORD=db-creds/password", want: EnvSecret{Name: "DB_PASSWORD", Secret: "db-creds", Key: "password"}},
		{name: "key with dots", in: "TLS=certs/tls.key", want: EnvSecret{Name: "TLS", Secret: "certs", Key: "tls.key"}},
		{name: "no equals", in: "DB_PASSWORD", wantErr: `--env-secret "DB_PASSWORD": must be NAME=SECRET/KEY`},
		{name: "no key", in: "A=creds", wantErr: `--env-secret "A=creds": must be NAME=SECRET/KEY`},
		{name: "empty secret", in: "A=/k", wantErr: `--env-secret "A=/k"`},
		{name: "empty name", in: "=s/k", wantErr: `--env-secret "=s/k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEnvSecret(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseEnvSecret() error = %v, want it to contain %q and wrap ErrInvalid", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEnvSecret() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseEnvSecret() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
