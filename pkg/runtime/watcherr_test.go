package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// refusedList is a reflector's error for a list the server refused, as
// client-go words it: the whole request URL, then the cause.
func refusedList() error {
	return fmt.Errorf("failed to list *v1.Job: %w", &url.Error{
		Op:  "Get",
		URL: "https://127.0.0.1:6443/apis/batch/v1/namespaces/default/jobs?allowWatchBookmarks=true&labelSelector=gobrave-workload&sendInitialEvents=true&watch=true",
		Err: fmt.Errorf("dial tcp 127.0.0.1:6443: connect: %w", syscall.ECONNREFUSED),
	})
}

// TestWatchWarnings: a list or watch that fails is said once, in one line
// with its cause and without the request URL, then at most once a period
// while it keeps failing, with the count in between. A watch of an
// informer whose context ended says nothing; routine ends (closed,
// expired) and a handler with no one to warn go to client-go's default
// handler, which prints only errors.
func TestWatchWarnings(t *testing.T) {
	var reported []error
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...any) {
		reported = append(reported, err)
	}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	r := &cache.Reflector{}
	bg := context.Background()

	var warned []string
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	w := &watchWarner{what: `jobs in namespace "default" at 127.0.0.1:6443`, warn: func(s string) { warned = append(warned, s) },
		every: time.Minute, now: func() time.Time { return now }}

	ended, cancel := context.WithCancel(bg)
	cancel()
	w.handle(ended, r, errors.New("stream error: stream ID 3; CANCEL"))
	w.handle(bg, r, fmt.Errorf("Get \"https://127.0.0.1/api/v1/pods?watch=true\": %w", context.Canceled))
	w.handle(bg, r, io.EOF)
	w.handle(bg, r, apierrors.NewResourceExpired("too old resource version: 1 (5)"))
	w.handle(bg, r, apierrors.NewGone("gone"))
	if len(warned) != 0 || len(reported) != 0 {
		t.Fatalf("warned %q, reported %v for stops and routine ends, want nothing", warned, reported)
	}

	want := `cannot list or watch jobs in namespace "default" at 127.0.0.1:6443 (retrying): dial tcp 127.0.0.1:6443: connect: connection refused`
	w.handle(bg, r, refusedList())
	if len(warned) != 1 || warned[0] != want {
		t.Fatalf("warned %q, want [%q]", warned, want)
	}
	// The retries of the next minute are counted, not said.
	for range 3 {
		now = now.Add(15 * time.Second)
		w.handle(bg, r, refusedList())
	}
	if len(warned) != 1 {
		t.Fatalf("warned %q within a minute of the first warning, want it alone", warned)
	}
	now = now.Add(15 * time.Second)
	w.handle(bg, r, apierrors.NewServiceUnavailable("the server is shutting down"))
	if len(warned) != 2 || !strings.Contains(warned[1], "(retrying; 3 more failures since the last warning): the server is shutting down") {
		t.Fatalf("warned %q, want a second warning a minute later counting the 3 failures between", warned)
	}
	if len(reported) != 0 {
		t.Fatalf("reported %v to client-go's handlers, want every failure warned instead", reported)
	}

	// With no one to warn, client-go's default handler (its klog error line).
	nobody := WatchWarnings("pods", nil)
	nobody(ended, r, errors.New("stream error: stream ID 3; CANCEL"))
	if len(reported) != 0 {
		t.Fatalf("reported %v for a stopped informer, want nothing", reported)
	}
	nobody(bg, r, refusedList())
	if len(reported) != 1 || !errors.Is(reported[0], syscall.ECONNREFUSED) {
		t.Fatalf("reported %v, want the refused connection", reported)
	}
}

// TestBrief: a failed request's error loses its method and URL, keeps its
// cause and still unwraps to the whole; other errors are unchanged.
func TestBrief(t *testing.T) {
	err := Brief(refusedList())
	if got := err.Error(); got != "dial tcp 127.0.0.1:6443: connect: connection refused" {
		t.Errorf("Brief: %q, want the cause alone", got)
	}
	var ue *url.Error
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &ue) {
		t.Errorf("Brief(%v) does not unwrap to the request's error", err)
	}
	// The server's answer, without the reflector's "failed to list *v1.Job: ".
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("no"))
	err = Brief(fmt.Errorf("failed to list *v1.Job: %w", forbidden))
	if got := err.Error(); got != forbidden.Error() || !apierrors.IsForbidden(err) {
		t.Errorf("Brief: %q (forbidden: %t), want %q", got, apierrors.IsForbidden(err), forbidden.Error())
	}
	other := errors.New("very short watch: 0s")
	if got := Brief(other); got != other {
		t.Errorf("Brief(%v) = %v, want it unchanged", other, got)
	}
	if Brief(nil) != nil {
		t.Error("Brief(nil) is not nil")
	}
}
