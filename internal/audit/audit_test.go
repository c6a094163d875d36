package audit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPerObject(t *testing.T) {
	for _, c := range []struct {
		uri  string
		want bool
	}{
		// The plugin's constant requests: label-filtered watch-lists of a namespace.
		{"/apis/apps/v1/namespaces/bench/deployments?allowWatchBookmarks=true&labelSelector=gobrave-workload&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true", false},
		{"/apis/batch/v1/jobs?labelSelector=gobrave-workload&limit=500", false},
		// ... and cluster-wide, above 10 namespaces.
		{"/apis/apps/v1/deployments?allowWatchBookmarks=true&labelSelector=gobrave-workload&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true", false},
		{"/apis/apps/v1/namespaces/bench-007/deployments?allowWatchBookmarks=true&labelSelector=gobrave-workload&watch=true", false},
		{"/api/v1/namespaces/bench/pods?labelSelector=gobrave-workload%2Cgobrave.dev%2Fkind%3Djob&watch=true", false},
		{"/apis/batch/v1/namespaces/bench/jobs?labelSelector=gobrave-workload+notin+%28x%29", false},
		{"/version", false},
		// One object by name.
		{"/apis/apps/v1/namespaces/bench/deployments/web", true},
		{"/apis/batch/v1/namespaces/bench/jobs/task-1/status", true},
		{"/apis/batch/v1/namespaces/bench/jobs?fieldSelector=metadata.name%3Dtask-1&watch=true", true},
		{"/apis/batch/v1/namespaces/bench/jobs?fieldSelector=status.successful%3D1%2Cmetadata.name%3Dx", true},
		// One workload's pods by label: the per-object forms the first classifier missed.
		{"/api/v1/namespaces/bench/pods?labelSelector=batch.kubernetes.io%2Fcontroller-uid%3D3b1f0c1e-0000-4000-8000-000000000001", true},
		{"/api/v1/namespaces/bench/pods?labelSelector=controller-uid%3D3b1f", true},
		{"/api/v1/namespaces/bench/pods?labelSelector=gobrave-workload%3Dweb", true},
		{"/api/v1/namespaces/bench/pods?labelSelector=gobrave-workload+in+%28web%29&limit=1", true},
		{"/api/v1/namespaces/bench/pods?labelSelector=job-name%3Dtask-1", true},
		{"/apis/apps/v1/namespaces/bench/replicasets?labelSelector=pod-template-hash%3D5d9f", true},
	} {
		if got := (Request{URI: c.uri}).PerObject(); got != c.want {
			t.Errorf("PerObject(%s) = %v, want %v", c.uri, got, c.want)
		}
	}
}

func TestResource(t *testing.T) {
	for uri, want := range map[string]string{
		"/apis/batch/v1/namespaces/b/jobs?labelSelector=gobrave-workload&watch=true": "jobs",
		"/apis/batch/v1/namespaces/b/jobs/x/status":                                  "jobs",
		"/api/v1/pods?limit=500":                                                     "pods",
		"/version":                                                                   "/version",
	} {
		if got := (Request{URI: uri}).Resource(); got != want {
			t.Errorf("Resource(%s) = %q, want %q", uri, got, want)
		}
	}
}

// TestRead reads a log as the API server writes it: a watch has a
// ResponseStarted and a ResponseComplete line with one auditID and comes
// once; the needles leave other lines undecoded; the impersonated user is
// kept; an offset skips what was logged before it.
func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log := `{"kind":"Event","level":"Metadata","auditID":"a1","stage":"ResponseStarted","requestURI":"/apis/batch/v1/namespaces/b/jobs?labelSelector=gobrave-workload&watch=true","verb":"watch","userAgent":"kubectl-gobrave/v1 (linux/amd64)","impersonatedUser":{"username":"u1"}}
{"kind":"Event","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/apis/batch/v1/namespaces/b/jobs/x","verb":"get","userAgent":"kubectl/v1.37.2 (linux/amd64)"}
{"kind":"Event","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/batch/v1/namespaces/b/jobs?labelSelector=gobrave-workload&watch=true","verb":"watch","userAgent":"kubectl-gobrave/v1 (linux/amd64)","impersonatedUser":{"username":"u1"}}
{"kind":"Event","level":"Metadata","auditID":"a3","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/b/pods?labelSelector=batch.kubernetes.io%2Fcontroller-uid%3Du1","verb":"list","userAgent":"kubectl-gobrave/v1 (linux/amd64)"}
not json: never decoded, no needle in it
`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	l := Log{Path: path}
	var got []Request
	if err := l.Read(0, func(r Request) { got = append(got, r) }, `"userAgent":"kubectl-gobrave/`, `"userAgent":"kubectl/`); err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{AuditID: "a1", Verb: "watch", URI: "/apis/batch/v1/namespaces/b/jobs?labelSelector=gobrave-workload&watch=true", UserAgent: "kubectl-gobrave/v1 (linux/amd64)", User: "u1"},
		{AuditID: "a2", Verb: "get", URI: "/apis/batch/v1/namespaces/b/jobs/x", UserAgent: "kubectl/v1.37.2 (linux/amd64)"},
		{AuditID: "a3", Verb: "list", URI: "/api/v1/namespaces/b/pods?labelSelector=batch.kubernetes.io%2Fcontroller-uid%3Du1", UserAgent: "kubectl-gobrave/v1 (linux/amd64)"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Read (-want +got):\n%s", d)
	}
	if err := l.Read(0, func(Request) {}); err == nil {
		t.Error("Read without needles decoded the line that is not JSON without an error")
	}
	end, err := l.Offset()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := l.Read(end, func(Request) { n++ }); err != nil || n != 0 {
		t.Errorf("from the end: %d requests, %v; want none", n, err)
	}
}
