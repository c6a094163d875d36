package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAuditRequests reads a log as the API server writes it: a watch has a ResponseStarted and
// a ResponseComplete line with one auditID and counts once; other agents are left out; prefixes
// group the rest.
func TestAuditRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log := `{"kind":"Event","level":"Metadata","auditID":"a1","stage":"ResponseStarted","requestURI":"/apis/batch/v1/namespaces/b/jobs?labelSelector=gobrave-workload&watch=true","verb":"watch","userAgent":"kubectl-gobrave/v1 (linux/amd64)"}
{"kind":"Event","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/apis/batch/v1/namespaces/b/jobs/x","verb":"get","userAgent":"kubectl/v1.37.2 (linux/amd64)"}
{"kind":"Event","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/batch/v1/namespaces/b/jobs?labelSelector=gobrave-workload&watch=true","verb":"watch","userAgent":"kubectl-gobrave/v1 (linux/amd64)"}
{"kind":"Event","level":"Metadata","auditID":"a3","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/b/pods?labelSelector=batch.kubernetes.io%2Fcontroller-uid%3Du1","verb":"list","userAgent":"kubectl-gobrave/v1 (linux/amd64)"}
{"kind":"Event","level":"Metadata","auditID":"a4","stage":"ResponseComplete","requestURI":"/api/v1/nodes","verb":"list","userAgent":"kube-scheduler/v1.37.2"}
`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &auditLog{path: path}
	rs, err := a.requests(0, "kubectl-gobrave/", "kubectl/")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rs["kubectl-gobrave/"]); got != 2 {
		t.Errorf("%d plugin requests, want 2 (the watch once, the pod list): %v", got, rs["kubectl-gobrave/"])
	}
	if got := perObjectCount(rs["kubectl-gobrave/"]); got != 1 {
		t.Errorf("%d per-object plugin requests, want 1 (the pod list by controller-uid)", got)
	}
	if got := len(rs["kubectl/"]); got != 1 {
		t.Errorf("%d kubectl requests, want 1", got)
	}
	if got := summarize(rs["kubectl-gobrave/"]); got != "list /api/v1/namespaces/b/pods <one workload by labelSelector>; watch /apis/batch/v1/namespaces/b/jobs" {
		t.Errorf("summary %q", got)
	}

	// The same request in several namespaces is one kind of request.
	spread := []request{
		{Verb: "watch", URI: "/apis/batch/v1/namespaces/bench-000/jobs?labelSelector=gobrave-workload&watch=true"},
		{Verb: "watch", URI: "/apis/batch/v1/namespaces/bench-001/jobs?labelSelector=gobrave-workload&watch=true"},
		{Verb: "watch", URI: "/apis/apps/v1/deployments?labelSelector=gobrave-workload&watch=true"},
	}
	if got := summarize(spread); got != "watch /apis/apps/v1/deployments; watch /apis/batch/v1/namespaces/*/jobs ×2" {
		t.Errorf("summary over namespaces %q", got)
	}

	// From an offset: only what was written after it.
	fi, _ := os.Stat(path)
	rs, err = a.requests(fi.Size(), "kubectl-gobrave/")
	if err != nil || len(rs) != 0 {
		t.Errorf("from the end: %v, %v; want nothing", rs, err)
	}
}
