package cmd

import (
	"net/http"
	"reflect"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// streamWindow is the HTTP/2 receive buffer of each stream of the plugin's
// API connections (client-go's default is golang.org/x/net/http2's 4 MiB).
// The client buffers up to this much of a response it has not read yet:
// recover --once reads two watch-lists at once and records what it reads
// more slowly than the API server sends it, so at 10,000 workloads and more
// both buffers fill: 10 MiB of its peak RSS at 10,000 and at 100,000
// (hack/recmem -tls, docs/performance.md). 1 MiB still keeps a stream at
// 10 MB/s across a 100 ms round trip, more than recover records.
const streamWindow = 1 << 20

// boundStreamBuffers makes the clients of rc use HTTP/2 connections whose
// streams buffer at most streamWindow bytes. client-go configures HTTP/2 on
// a transport it caches and shares (wrapped in a tracker for its cache);
// the setting is read when a connection is made, so the shared transport is
// not changed: the clients of rc get a copy of it, configured anew.
// Anything else than client-go's own transport (a custom rc.Transport) is
// left as it is.
func boundStreamBuffers(rc *rest.Config) {
	rc.WrapTransport = transport.Wrappers(withStreamWindow, rc.WrapTransport)
}

func withStreamWindow(rt http.RoundTripper) http.RoundTripper {
	base := rt
	if w, ok := rt.(utilnet.RoundTripperWrapper); ok && isCacheTracker(rt) {
		base = w.WrappedRoundTripper()
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return rt
	}
	c := t.Clone()
	c.TLSNextProto = nil // the shared transport's HTTP/2 registration: set up again
	c.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: streamWindow}
	return utilnet.SetTransportDefaults(c)
}

// isCacheTracker reports whether rt is client-go's wrapper of the transports
// it caches (transport.trackedTransport, unexported), which only passes
// requests on: replacing it by a copy of what it wraps loses nothing.
func isCacheTracker(rt http.RoundTripper) bool {
	t := reflect.TypeOf(rt)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "k8s.io/client-go/transport" && t.Elem().Name() == "trackedTransport"
}
