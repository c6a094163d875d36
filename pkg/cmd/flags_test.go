package cmd

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

const flagsKubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
- name: other
  cluster: {server: "https://other.example:6443"}
users:
- name: u
  user: {}
- name: u2
  user: {token: t2}
contexts:
- name: a
  context: {cluster: a, user: u, namespace: ns-a}
- name: b
  context: {cluster: b, user: u, namespace: ns-b}
`

// Every kubectl flag that cli-runtime's ConfigFlags offers must reach the
// client config of the context a verb uses: --proxy-url and --as-user-extra
// were once accepted and silently dropped. Each exported field of
// ConfigFlags has a check here; a field cli-runtime adds without one fails
// the test, so an upgrade cannot drop a flag silently again.
func TestFlagsForHonoursEveryConfigFlag(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	files := map[string]string{kubeconfig: flagsKubeconfig}
	for _, n := range []string{"ca.crt", "client.crt", "client.key"} {
		files[filepath.Join(dir, n)] = "x"
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	str := func(v string) *string { return &v }
	yes := func() *bool { v := true; return &v }

	type check struct {
		set  func(*genericclioptions.ConfigFlags)
		want func(*testing.T, *genericclioptions.ConfigFlags, *rest.Config)
	}
	checks := map[string]check{
		"CacheDir": {
			set: func(c *genericclioptions.ConfigFlags) { c.CacheDir = str(filepath.Join(dir, "cache")) },
			want: func(t *testing.T, fl *genericclioptions.ConfigFlags, _ *rest.Config) {
				if *fl.CacheDir != filepath.Join(dir, "cache") {
					t.Errorf("cache dir %q", *fl.CacheDir)
				}
			},
		},
		"KubeConfig": {
			set: func(*genericclioptions.ConfigFlags) {}, // every case sets it
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Host != "https://b.example:6443" {
					t.Errorf("host %q, want context b's server from the kubeconfig", rc.Host)
				}
			},
		},
		"Context": {
			set: func(c *genericclioptions.ConfigFlags) { c.Context = str("a") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Host != "https://b.example:6443" {
					t.Errorf("host %q, want the context flagsFor was asked for (b)", rc.Host)
				}
			},
		},
		"ClusterName": {
			set: func(c *genericclioptions.ConfigFlags) { c.ClusterName = str("other") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Host != "https://other.example:6443" {
					t.Errorf("host %q, want --cluster other's", rc.Host)
				}
			},
		},
		"AuthInfoName": {
			set: func(c *genericclioptions.ConfigFlags) { c.AuthInfoName = str("u2") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.BearerToken != "t2" {
					t.Errorf("token %q, want --user u2's", rc.BearerToken)
				}
			},
		},
		"Namespace": {
			set: func(c *genericclioptions.ConfigFlags) { c.Namespace = str("ns-flag") },
			want: func(t *testing.T, fl *genericclioptions.ConfigFlags, _ *rest.Config) {
				if ns, _, err := fl.ToRawKubeConfigLoader().Namespace(); err != nil || ns != "ns-flag" {
					t.Errorf("namespace %q (%v), want ns-flag", ns, err)
				}
			},
		},
		"APIServer": {
			set: func(c *genericclioptions.ConfigFlags) { c.APIServer = str("https://flag.example:443") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Host != "https://flag.example:443" {
					t.Errorf("host %q", rc.Host)
				}
			},
		},
		"TLSServerName": {
			set: func(c *genericclioptions.ConfigFlags) { c.TLSServerName = str("sni.example") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.ServerName != "sni.example" {
					t.Errorf("server name %q", rc.ServerName)
				}
			},
		},
		"Insecure": {
			set: func(c *genericclioptions.ConfigFlags) { c.Insecure = yes() },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if !rc.Insecure {
					t.Error("not insecure")
				}
			},
		},
		"CertFile": {
			set: func(c *genericclioptions.ConfigFlags) {
				c.CertFile, c.KeyFile = str(filepath.Join(dir, "client.crt")), str(filepath.Join(dir, "client.key"))
			},
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.CertFile != filepath.Join(dir, "client.crt") {
					t.Errorf("cert file %q", rc.CertFile)
				}
			},
		},
		"KeyFile": {
			set: func(c *genericclioptions.ConfigFlags) {
				c.CertFile, c.KeyFile = str(filepath.Join(dir, "client.crt")), str(filepath.Join(dir, "client.key"))
			},
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.KeyFile != filepath.Join(dir, "client.key") {
					t.Errorf("key file %q", rc.KeyFile)
				}
			},
		},
		"CAFile": {
			set: func(c *genericclioptions.ConfigFlags) { c.CAFile = str(filepath.Join(dir, "ca.crt")) },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.CAFile != filepath.Join(dir, "ca.crt") {
					t.Errorf("CA file %q", rc.CAFile)
				}
			},
		},
		"BearerToken": {
			set: func(c *genericclioptions.ConfigFlags) { c.BearerToken = str("flag-token") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.BearerToken != "flag-token" {
					t.Errorf("token %q", rc.BearerToken)
				}
			},
		},
		"Impersonate": {
			set: func(c *genericclioptions.ConfigFlags) { c.Impersonate = str("alice") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Impersonate.UserName != "alice" {
					t.Errorf("impersonate %+v", rc.Impersonate)
				}
			},
		},
		"ImpersonateUID": {
			set: func(c *genericclioptions.ConfigFlags) { c.Impersonate, c.ImpersonateUID = str("alice"), str("uid-1") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Impersonate.UID != "uid-1" {
					t.Errorf("impersonate %+v", rc.Impersonate)
				}
			},
		},
		"ImpersonateGroup": {
			set: func(c *genericclioptions.ConfigFlags) {
				c.Impersonate, c.ImpersonateGroup = str("alice"), &[]string{"devs"}
			},
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if !slices.Equal(rc.Impersonate.Groups, []string{"devs"}) {
					t.Errorf("impersonate %+v", rc.Impersonate)
				}
			},
		},
		"ImpersonateUserExtra": {
			set: func(c *genericclioptions.ConfigFlags) {
				c.Impersonate, c.ImpersonateUserExtra = str("alice"), &[]string{"scopes=view"}
			},
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if got := rc.Impersonate.Extra["scopes"]; !slices.Equal(got, []string{"view"}) {
					t.Errorf("impersonate extra %v", rc.Impersonate.Extra)
				}
			},
		},
		"Username": {
			set: func(c *genericclioptions.ConfigFlags) { c.Username = str("bob") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Username != "bob" {
					t.Errorf("username %q", rc.Username)
				}
			},
		},
		"Password": {
			set: func(c *genericclioptions.ConfigFlags) { c.Username, c.Password = str("bob"), str("secret") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Password != "secret" {
					t.Errorf("password %q", rc.Password)
				}
			},
		},
		"Timeout": {
			set: func(c *genericclioptions.ConfigFlags) { c.Timeout = str("7s") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Timeout != 7*time.Second {
					t.Errorf("timeout %s", rc.Timeout)
				}
			},
		},
		"DisableCompression": {
			set: func(c *genericclioptions.ConfigFlags) { c.DisableCompression = yes() },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if !rc.DisableCompression {
					t.Error("compression not disabled")
				}
			},
		},
		"ProxyURL": {
			set: func(c *genericclioptions.ConfigFlags) { c.ProxyURL = str("http://127.0.0.1:3128") },
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.Proxy == nil {
					t.Fatal("no proxy")
				}
				req, _ := http.NewRequest(http.MethodGet, rc.Host, nil)
				if u, err := rc.Proxy(req); err != nil || u == nil || u.String() != "http://127.0.0.1:3128" {
					t.Errorf("proxy for %s: %v, %v", rc.Host, u, err)
				}
			},
		},
		"WrapConfigFn": {
			set: func(c *genericclioptions.ConfigFlags) {
				c.WrapConfigFn = func(rc *rest.Config) *rest.Config { rc.BearerTokenFile = "wrapped"; return rc }
			},
			want: func(t *testing.T, _ *genericclioptions.ConfigFlags, rc *rest.Config) {
				if rc.BearerTokenFile != "wrapped" {
					t.Error("WrapConfigFn not applied")
				}
			},
		},
	}

	typ := reflect.TypeFor[genericclioptions.ConfigFlags]()
	for i := range typ.NumField() {
		field := typ.Field(i)
		if !field.IsExported() {
			continue
		}
		c, ok := checks[field.Name]
		if !ok {
			t.Errorf("genericclioptions.ConfigFlags has a new field %s: make sure flagsFor passes it on and add a check here", field.Name)
			continue
		}
		t.Run(field.Name, func(t *testing.T) {
			flags := genericclioptions.NewConfigFlags(true)
			flags.KubeConfig = str(kubeconfig)
			c.set(flags)
			f := &Factory{ConfigFlags: flags}
			dst := f.flagsFor("b")
			if *dst.Context != "b" {
				t.Fatalf("context %q, want b", *dst.Context)
			}
			rc, err := f.RESTConfig("b")
			if err != nil {
				t.Fatal(err)
			}
			c.want(t, dst, rc)
		})
	}
}
