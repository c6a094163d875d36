package monitor

import (
	"context"
	"errors"
	"fmt"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// TestWatchErrorHandlerQuietOnStop: a watch that ends because its informer
// is stopped (an interrupted wait) reports nothing: client-go's default
// handler printed "Failed to watch ... context canceled" on stderr above the
// command's one-line error. Any other failure is still reported and kept as
// the informer's last error.
func TestWatchErrorHandlerQuietOnStop(t *testing.T) {
	var reported []error
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...any) {
		reported = append(reported, err)
	}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })

	inf := &informer{kind: "job"}
	_, handle := watchErrorHandler(inf)
	r := &cache.Reflector{}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	handle(ended, r, fmt.Errorf("Get \"https://127.0.0.1/apis/batch/v1/jobs?watch=true\": %w", context.Canceled))
	handle(context.Background(), r, fmt.Errorf("watch: %w", context.Canceled))
	if len(reported) != 0 {
		t.Fatalf("reported %v for a stopped informer, want nothing", reported)
	}
	if err := inf.getLastErr(); err != nil {
		t.Fatalf("last error %v after a stop, want none", err)
	}

	refused := errors.New("connection refused")
	handle(context.Background(), r, refused)
	if len(reported) != 1 || !errors.Is(reported[0], refused) {
		t.Fatalf("reported %v, want the refused connection", reported)
	}
	if err := inf.getLastErr(); !errors.Is(err, refused) {
		t.Fatalf("last error %v, want the refused connection", err)
	}
}
