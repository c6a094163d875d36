package cmd

import (
	"net"
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
