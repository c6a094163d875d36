package monitor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestSyncWaitsWhileObjectsArrive: the sync timeout is a budget of time
// without progress, not in all. A job watch-list that sends an object every
// gap (well within the 1 s SyncTimeout) and takes twice SyncTimeout in all
// syncs, and the last job's start is recorded; with a total budget the
// informer timed out half-way. (The stuck server that fails within the
// budget: TestInformerCannotSync.)
func TestSyncWaitsWhileObjectsArrive(t *testing.T) {
	const (
		n   = 8
		gap = 250 * time.Millisecond // n*gap = 2 s, twice SyncTimeout
	)
	st := newStore(t)
	last := jobID("slow", fmt.Sprintf("task-%d", n-1))
	record(t, st, last, "u7", store.StateCreated)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") != "true" || q.Get("sendInitialEvents") != "true" {
			if q.Get("watch") == "true" {
				<-r.Context().Done() // the watch after the list: nothing new
				return
			}
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fl := w.(http.Flusher)
		enc := json.NewEncoder(w)
		apiVersion, kind := "v1", "Pod"
		if strings.HasSuffix(r.URL.Path, "/jobs") {
			apiVersion, kind = "batch/v1", "Job"
			for i := range n {
				j := job("slow", fmt.Sprintf("task-%d", i), fmt.Sprintf("u%d", i), batchv1.JobStatus{Active: 1})
				j.TypeMeta = metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
				j.ResourceVersion = "10"
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": j})
				fl.Flush()
				select {
				case <-time.After(gap):
				case <-r.Context().Done():
					return
				}
			}
		}
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"resourceVersion": "10", "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		fl.Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := New(client, st, Options{Owner: owner("a"), Once: true, SyncTimeout: time.Second})
	r := await(t, start(t.Context(), m.with(last)))
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	if h := history(t, st, last); len(h) != 2 || !strings.HasPrefix(h[1], "ContainerStarted") {
		t.Errorf("history of %s: %q, want Created then ContainerStarted", last, h)
	}
}
