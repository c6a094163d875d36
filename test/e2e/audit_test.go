package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The request-count guards count on the API server's side: its audit log (hack/cluster-up.sh
// --audit-log: every request at Metadata level, one JSON line per stage). The requests of one
// plugin command are told from everything else on the shared cluster by an identity of its own:
// the command runs with --as=USER --as-group=system:masters, a user name no other process uses,
// and the audit event of each of its requests names it as impersonatedUser. The classification
// of "a request about one object" is the benchmark's (hack/bench/audit.go).

// auditRequest is one API request as the API server logged it.
type auditRequest struct {
	Verb, URI, UserAgent string
}

func (r auditRequest) path() string { p, _, _ := strings.Cut(r.URI, "?"); return p }

// resource is the last path element naming a resource collection (pods, jobs …), or the path.
func (r auditRequest) resource() string {
	parts := strings.Split(strings.Trim(r.path(), "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if _, ok := auditCollections[parts[i]]; ok {
			return parts[i]
		}
	}
	return r.path()
}

var auditCollections = map[string]bool{"pods": true, "jobs": true, "deployments": true, "replicasets": true, "services": true, "namespaces": true, "events": true}

// auditPerObjectPath matches a request about one named object: .../namespaces/NS/KIND/NAME.
var auditPerObjectPath = regexp.MustCompile(`/namespaces/[^/?]+/[a-z.]+/[^/?]+`)

// auditPerObjectLabels are the label keys whose equality narrows a list or watch to the pods (or
// ReplicaSets) of one workload.
var auditPerObjectLabels = map[string]bool{
	"gobrave-workload": true, "controller-uid": true, "batch.kubernetes.io/controller-uid": true,
	"job-name": true, "batch.kubernetes.io/job-name": true, "pod-template-hash": true,
}

// perObject reports whether r is about one named object: its path names it, its field selector
// is metadata.name, or its label selector narrows it to one workload.
func (r auditRequest) perObject() bool {
	path, query, _ := strings.Cut(r.URI, "?")
	if auditPerObjectPath.MatchString(path) {
		return true
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return false
	}
	for _, f := range strings.Split(q.Get("fieldSelector"), ",") {
		if k, _, ok := strings.Cut(f, "="); ok && strings.TrimSpace(k) == "metadata.name" {
			return true
		}
	}
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return false
	}
	reqs, _ := sel.Requirements()
	for _, req := range reqs {
		switch req.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if auditPerObjectLabels[req.Key()] {
				return true
			}
		}
	}
	return false
}

// auditUser is an identity for one command's requests.
type auditUser struct {
	name string
	from int64 // the audit log's size before the command
}

var auditSeq atomic.Int64

// newAuditUser notes where the audit log ends now and returns a user name no other process uses.
func newAuditUser(t *testing.T) *auditUser {
	t.Helper()
	requireCluster(t)
	fi, err := os.Stat(harness.auditLog)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return &auditUser{name: fmt.Sprintf("gobrave-e2e-audit-%d-%d", os.Getpid(), auditSeq.Add(1)), from: fi.Size()}
}

// flags are the plugin's flags to run as u.
func (u *auditUser) flags() []string {
	return []string{"--as=" + u.name, "--as-group=system:masters"}
}

// requests returns, each once, the requests of user agent prefix uaPrefix made as u, after a
// barrier: a request this test makes as u once the command has ended, read back from the log,
// so that every request of the command is in it.
func (u *auditUser) requests(t *testing.T, uaPrefix string) []auditRequest {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", harness.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate.UserName, cfg.Impersonate.Groups = u.name, []string{"system:masters"}
	cfg.UserAgent = "gobrave-e2e-barrier/" + u.name
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{Limit: 1}); err != nil {
		t.Fatalf("barrier request: %v", err)
	}
	var out []auditRequest
	waitFor(t, 30*time.Second, func() (bool, error) {
		var barrier bool
		var err error
		out, barrier, err = u.read(uaPrefix, cfg.UserAgent)
		if err != nil || !barrier {
			return false, fmt.Errorf("the barrier request is not in the audit log yet (%v)", err)
		}
		return true, nil
	})
	return out
}

// read parses the audit log from u.from on.
func (u *auditUser) read(uaPrefix, barrierUA string) (out []auditRequest, barrier bool, err error) {
	f, err := os.Open(harness.auditLog)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if _, err := f.Seek(u.from, io.SeekStart); err != nil {
		return nil, false, err
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	needle := `"` + u.name + `"`
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), needle) {
			continue
		}
		var e struct {
			AuditID          string `json:"auditID"`
			Verb             string `json:"verb"`
			RequestURI       string `json:"requestURI"`
			UserAgent        string `json:"userAgent"`
			ImpersonatedUser *struct {
				Username string `json:"username"`
			} `json:"impersonatedUser"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, false, fmt.Errorf("audit log %s: %w", harness.auditLog, err)
		}
		if e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != u.name || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		switch {
		case e.UserAgent == barrierUA:
			barrier = true
		case strings.HasPrefix(e.UserAgent, uaPrefix):
			out = append(out, auditRequest{Verb: e.Verb, URI: e.RequestURI, UserAgent: e.UserAgent})
		}
	}
	return out, barrier, sc.Err()
}

// countByVerb is "verb resource" -> count.
func countByVerb(rs []auditRequest) map[string]int {
	n := map[string]int{}
	for _, r := range rs {
		n[r.Verb+" "+r.resource()]++
	}
	return n
}

// describe lists the requests, one a line, sorted.
func describe(rs []auditRequest) string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = r.Verb + " " + r.URI
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n  ")
}
