package monitor

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestSyncTimeoutNamesTheServer: an API server that accepts requests and
// never answers fails the sync with an error naming its address, whatever
// the last error says (the workload informers' own watch-list times out
// with no URL in its error; the e2e fault suite checks every verb for it).
func TestSyncTimeoutNamesTheServer(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	id := jobID("hang", "task")
	record(t, st, id, "u1", store.StateRunning)
	m := New(client, st, Options{Owner: owner("a"), SyncTimeout: time.Second})
	r := await(t, start(t.Context(), m.with(id)))
	host := strings.TrimPrefix(srv.URL, "http://")
	want := `informer in namespace "hang" at ` + host + ` to sync`
	if r.err == nil || !strings.Contains(r.err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", r.err, want)
	}
}
