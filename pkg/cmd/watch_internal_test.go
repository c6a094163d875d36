package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// syncBuffer is a buffer the test reads while the watch writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func watchWorkload(ns, kind, name string, labels map[string]string) store.Workload {
	return store.Workload{RuntimeID: "k8s-" + ns + "|" + kind + "|" + name, Runtime: "k8s", Namespace: ns, Kind: kind, Name: name,
		Spec: spec.ContainerSpec{Name: name, Image: "busybox", WorkloadKind: kind, Labels: labels}}
}

// TestPsWatchPrintsChangesOfOtherStores: a change recorded through another
// handle on the database (another process) is printed as a row, filtered
// by the selection; the watch ends without error when its context does.
func TestPsWatchPrintsChangesOfOtherStores(t *testing.T) {
	for _, output := range []string{"", "json"} {
		t.Run("-o "+output, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "state.db")
			other, err := store.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			web := watchWorkload("default", "deployment", "web", map[string]string{"team": "web"})
			etl := watchWorkload("default", "job", "etl", map[string]string{"team": "data"})
			for _, w := range []store.Workload{web, etl} {
				if err := other.Put(ctx, w, store.Transition{Type: store.Created, Message: "created"}); err != nil {
					t.Fatal(err)
				}
			}
			f := NewFactory()
			f.StateDBFlag = path
			f.Home = t.TempDir()
			f.Getenv = func(string) string { return "" }
			defer f.Close()
			out, errOut := &syncBuffer{}, &syncBuffer{}
			o := &PsOptions{IOStreams: genericiooptions.IOStreams{Out: out, ErrOut: errOut}, f: f, now: time.Now, Poll: 10 * time.Millisecond,
				Watch: true, Selection: Selection{Selector: "team=web"}}
			o.Output = output
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- o.Run(wctx) }()
			waitFor := func(what string, cond func(string) bool) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for !cond(out.String()) {
					if time.Now().After(deadline) {
						t.Fatalf("no %s in the watch's output:\n%s", what, out.String())
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			waitFor("listing", func(s string) bool { return strings.Contains(s, web.RuntimeID) })
			for _, tr := range []store.Transition{
				{RuntimeID: etl.RuntimeID, Type: store.StopRequested},
				{RuntimeID: web.RuntimeID, Type: store.StopRequested},
				{RuntimeID: web.RuntimeID, Type: store.ContainerExited, UID: "u1"},
			} {
				if _, _, err := other.Apply(ctx, tr); err != nil {
					t.Fatal(err)
				}
			}
			waitFor("exited row", func(s string) bool { return strings.Contains(s, "exited") })
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("watch ended with %v", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if strings.Contains(out.String(), etl.RuntimeID) {
				t.Errorf("the unselected etl was printed:\n%s", out.String())
			}
			if output == "json" {
				for _, l := range lines {
					var v WorkloadView
					if err := json.Unmarshal([]byte(l), &v); err != nil || v.RuntimeID != web.RuntimeID {
						t.Errorf("line %q: %v", l, err)
					}
				}
				return
			}
			if !strings.HasPrefix(lines[0], "RUNTIME ID") || strings.Count(out.String(), "RUNTIME ID") != 1 {
				t.Errorf("want one header first:\n%s", out.String())
			}
		})
	}
}
