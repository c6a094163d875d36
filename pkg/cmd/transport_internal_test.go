package cmd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestRESTConfigBoundsStreamBuffers: the transport under the plugin's
// clients (as client-go builds and caches it, then WrapTransport) is an
// HTTP/2 transport whose streams buffer at most streamWindow bytes, not
// x/net/http2's 4 MiB: recover --once reads two watch-lists at once and the
// client buffered up to 4 MiB of each (hack/recmem -tls). A client-go that
// wraps its cached transport differently fails here rather than silently.
func TestRESTConfigBoundsStreamBuffers(t *testing.T) {
	f := factoryFor(t, "https://127.0.0.1:6443", "insecure-skip-tls-verify: true", "token: x")
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

// TestWatchClientSpeaksHTTP11: against an API server that speaks HTTP/2,
// Client's requests use it and WatchClient's use HTTP/1.1 (a connection
// per watch), each built once per context.
func TestWatchClientSpeaksHTTP11(t *testing.T) {
	var mu sync.Mutex
	protos := map[string][]int{} // by User-Agent's client: "watch" or "client"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.URL.Query().Get("who")] = append(protos[r.URL.Query().Get("who")], r.ProtoMajor)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	f := factoryFor(t, srv.URL, "insecure-skip-tls-verify: true", "token: x")
	list := func(who string, get func(string) (kubernetes.Interface, error)) {
		t.Helper()
		c, err := get("k8s")
		if err != nil {
			t.Fatal(err)
		}
		again, err := get("k8s")
		if err != nil || again != c {
			t.Errorf("%s: a second call built another clientset (%v)", who, err)
		}
		// A query parameter tells the server who is asking.
		err = c.CoreV1().RESTClient().Get().Resource("pods").Param("who", who).Do(context.Background()).Error()
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
	}
	list("client", f.Client)
	list("watch", f.WatchClient)
	mu.Lock()
	defer mu.Unlock()
	if got := protos["client"]; len(got) != 1 || got[0] != 2 {
		t.Errorf("Client's request: HTTP major versions %v, want [2]", got)
	}
	if got := protos["watch"]; len(got) != 1 || got[0] != 1 {
		t.Errorf("WatchClient's request: HTTP major versions %v, want [1]", got)
	}
}

// TestWatchClientPlainHTTP: a context whose server is plain http (a local
// proxy) works through WatchClient too: the TLS setting that keeps it off
// HTTP/2 must not make client-go refuse or mangle a config without TLS.
func TestWatchClientPlainHTTP(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Proto+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`)
	}))
	defer srv.Close()
	f := factoryFor(t, srv.URL, "", "")
	c, err := f.WatchClient("k8s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list over plain http: %v", err)
	}
	if len(got) != 1 || got[0] != "HTTP/1.1 /api/v1/namespaces/ns/pods" {
		t.Errorf("the server saw %q, want one HTTP/1.1 list of the pods", got)
	}
}

// factoryFor is a Factory whose --context is "c", of a kubeconfig with one
// cluster at server (with the cluster and user settings given, in YAML flow
// style, e.g. "insecure-skip-tls-verify: true" and "token: x").
func factoryFor(t *testing.T, server, cluster, user string) *Factory {
	t.Helper()
	if cluster != "" {
		cluster = ", " + cluster
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q%s}}]
users: [{name: u, user: {%s}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server, cluster, user)), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	ctxName := "c"
	flags.Context = &ctxName
	return &Factory{ConfigFlags: flags}
}
