package monitor

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// TestWatchErrorHandlerQuietOnStop: a watch that ends because its informer
// is stopped (an interrupted wait) reports nothing: client-go's default
// handler printed "Failed to watch ... context canceled" on stderr above the
// command's one-line error. Any other failure is still reported and kept as
// the informer's last error; a refusal by RBAC goes to the denied channel
// alone (Run fails fast with its own error).
func TestWatchErrorHandlerQuietOnStop(t *testing.T) {
	var reported []error
	inf := &informer{kind: "job"}
	denied, handle := watchErrorHandler(inf, func(_ context.Context, _ *cache.Reflector, err error) {
		reported = append(reported, err)
	})
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

	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("no"))
	handle(context.Background(), r, forbidden)
	if len(reported) != 1 {
		t.Fatalf("reported %v, want the refusal by RBAC on the denied channel alone", reported)
	}
	select {
	case err := <-denied:
		if !errors.Is(err, forbidden) {
			t.Fatalf("denied %v, want the refusal", err)
		}
	default:
		t.Fatal("nothing on the denied channel after a refusal by RBAC")
	}
}
