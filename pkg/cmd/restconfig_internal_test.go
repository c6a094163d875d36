package cmd

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// TestKubeconfigLoadedOncePerContext: recover --once builds its clientset,
// the cluster's identity and its metadata client from one load of the
// kubeconfig. The file is removed after the first RESTConfig: every later
// step of the pass must still find the context (a second load fails), and
// each caller gets a copy it may change.
func TestKubeconfigLoadedOncePerContext(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	ctxName := "c"
	flags.Context = &ctxName
	f := &Factory{ConfigFlags: flags, Getenv: func(string) string { return "" }, Home: dir}
	rc, err := f.RESTConfig("c")
	if err != nil {
		t.Fatal(err)
	}
	rc.Host = "https://changed.example"
	if err := os.Remove(kubeconfig); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client("k8s"); err != nil {
		t.Fatalf("Client after the first load: %v (the kubeconfig was loaded again)", err)
	}
	id, err := f.ClusterID("k8s")
	if err != nil {
		t.Fatalf("ClusterID after the first load: %v (the kubeconfig was loaded again)", err)
	}
	if id != "https://127.0.0.1:6443" {
		t.Errorf("ClusterID = %q: a caller's change to its copy leaked into the shared config", id)
	}
	again, err := f.RESTConfig("c")
	if err != nil {
		t.Fatalf("RESTConfig again: %v", err)
	}
	if again.Host != "https://127.0.0.1:6443" || again.UserAgent != UserAgent() || again.WrapTransport == nil {
		t.Errorf("second RESTConfig: host %q, user agent %q, wrap %v", again.Host, again.UserAgent, again.WrapTransport != nil)
	}
	if _, err := f.RESTConfig("other"); err == nil {
		t.Error("RESTConfig of another context found a config: it must load the (now missing) kubeconfig")
	}
}
