package cmd

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// TestRESTConfigBoundsStreamBuffers: the transport under the plugin's
// clients (as client-go builds and caches it, then WrapTransport) is an
// HTTP/2 transport whose streams buffer at most streamWindow bytes, not
// x/net/http2's 4 MiB: recover --once reads two watch-lists at once and the
// client buffered up to 4 MiB of each (hack/recmem -tls). A client-go that
// wraps its cached transport differently fails here rather than silently.
func TestRESTConfigBoundsStreamBuffers(t *testing.T) {
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
	f := &Factory{ConfigFlags: flags}
	rc, err := f.RESTConfig("c")
	if err != nil {
		t.Fatal(err)
	}
	if rc.WrapTransport == nil {
		t.Fatal("RESTConfig sets no WrapTransport: the stream buffers are client-go's 4 MiB")
	}
	wrap := rc.WrapTransport
	var base http.RoundTripper
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		base = wrap(rt)
		return base
	}
	if _, err := rest.TransportFor(rc); err != nil {
		t.Fatal(err)
	}
	tr, ok := base.(*http.Transport)
	if !ok {
		t.Fatalf("the base transport is a %T, want a copy of client-go's *http.Transport", base)
	}
	if tr.HTTP2 == nil || tr.HTTP2.MaxReceiveBufferPerStream != streamWindow {
		t.Errorf("HTTP2 config %+v, want MaxReceiveBufferPerStream %d", tr.HTTP2, streamWindow)
	}
	if tr.TLSNextProto["h2"] == nil {
		t.Error("the copy does not speak HTTP/2 (no h2 in TLSNextProto)")
	}
	if tr.TLSClientConfig == nil || !tr.TLSClientConfig.InsecureSkipVerify {
		t.Errorf("the copy lost the kubeconfig's TLS settings: %+v", tr.TLSClientConfig)
	}
}
