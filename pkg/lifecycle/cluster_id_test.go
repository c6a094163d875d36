package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestOtherCluster: a record made on cluster A is refused every verb while
// its runtime points at cluster B, before anything is read or recorded (B
// has no such object, which must not mark it deleted); back on A it works.
// A record with no cluster learns the current one at its next verb.
func TestOtherCluster(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	current := "https://a:6443 (ca sha256:aaaa)"
	e.Cluster = func(string) (string, error) { return current, nil }
	w, _, err := e.Create(ctx, "k8s", "default", web)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Store.Cluster(ctx, w.RuntimeID); got != current {
		t.Fatalf("recorded cluster %q, want %q", got, current)
	}

	current = "https://b:6443 (ca sha256:bbbb)"
	c.ClearActions()
	before := history(t, e.Store, w.RuntimeID)
	for _, verb := range []store.EventType{store.StopRequested, store.StartRequested, store.DeleteRequested} {
		_, err := e.Apply(ctx, w, verb)
		if !errors.Is(err, ErrOtherCluster) {
			t.Fatalf("%s on another cluster: %v, want ErrOtherCluster", verb, err)
		}
		for _, want := range []string{"https://a:6443 (ca sha256:aaaa)", "https://b:6443 (ca sha256:bbbb)", "--context"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", verb, err, want)
			}
		}
	}
	if n := len(c.Actions()); n != 0 {
		t.Errorf("%d API requests on the other cluster: %v", n, c.Actions())
	}
	if diff := cmp.Diff(before, history(t, e.Store, w.RuntimeID)); diff != "" {
		t.Errorf("history changed (-before +after):\n%s", diff)
	}
	// Recover leaves it alone too.
	if _, ok, err := e.Recover(ctx, w); ok || err != nil {
		t.Errorf("Recover on another cluster: %v, %v", ok, err)
	}

	current = "https://a:6443 (ca sha256:aaaa)"
	if _, err := e.Apply(ctx, w, store.StopRequested); err != nil {
		t.Fatalf("stop back on its cluster: %v", err)
	}

	// A record from before clusters were recorded learns it.
	if err := e.Store.SetCluster(ctx, w.RuntimeID, ""); err != nil {
		t.Fatal(err)
	}
	current = "https://c:6443"
	if _, err := e.Apply(ctx, w, store.StartRequested); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Store.Cluster(ctx, w.RuntimeID); got != current {
		t.Errorf("learned cluster %q, want %q", got, current)
	}
}
