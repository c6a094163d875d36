package cmd

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestServerVersionNamesTheServer: an API server that accepts and never
// answers is named, with the cause, when the wait for its version ends.
func TestServerVersionNamesTheServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered, until the test ends
		}
	}()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: "https://" + l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = serverVersion(t.Context(), c, 50*time.Millisecond)
	want := "no answer from the API server at " + l.Addr().String() + " within 50ms: timed out"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestClusterIdentity(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("a CA bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rc   rest.Config
		want string
	}{
		{rest.Config{Host: "https://127.0.0.1:6443/"}, "https://127.0.0.1:6443"},
		{rest.Config{Host: "https://k.example:443/prefix/", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("a CA bundle")}}, "https://k.example:443/prefix (ca sha256:d872ed9faaaefdd9)"},
		{rest.Config{Host: "https://k.example:443", TLSClientConfig: rest.TLSClientConfig{CAFile: ca}}, "https://k.example:443 (ca sha256:d872ed9faaaefdd9)"},
	} {
		got, err := clusterIdentity(&c.rc)
		if err != nil || got != c.want {
			t.Errorf("clusterIdentity(%s) = %q, %v; want %q", c.rc.Host, got, err, c.want)
		}
	}
	if _, err := clusterIdentity(&rest.Config{Host: "https://x", TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(t.TempDir(), "missing")}}); err == nil {
		t.Error("a missing CA file gave no error")
	}
}
