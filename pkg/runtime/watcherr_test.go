package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// TestQuietOnStop: the watch of an informer whose context ended (logs
// --follow interrupted) reports nothing; any other failure goes to
// client-go's error handlers as before.
func TestQuietOnStop(t *testing.T) {
	var reported []error
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...any) {
		reported = append(reported, err)
	}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	r := &cache.Reflector{}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	QuietOnStop(ended, r, errors.New("stream error: stream ID 3; CANCEL"))
	QuietOnStop(context.Background(), r, fmt.Errorf("Get \"https://127.0.0.1/api/v1/pods?watch=true\": %w", context.Canceled))
	if len(reported) != 0 {
		t.Fatalf("reported %v for a stopped informer, want nothing", reported)
	}

	refused := errors.New("dial tcp 127.0.0.1:6443: connection refused")
	QuietOnStop(context.Background(), r, refused)
	if len(reported) != 1 || !errors.Is(reported[0], refused) {
		t.Fatalf("reported %v, want the refused connection", reported)
	}
}
