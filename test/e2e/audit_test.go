package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gobrave/kubectl-gobrave/internal/audit"
)

// The request-count guards count on the API server's side: its audit log (hack/cluster-up.sh
// --audit-log: every request at Metadata level, one JSON line per stage). The requests of one
// plugin command are told from everything else on the shared cluster by an identity of its own:
// the command runs with --as=USER --as-group=system:masters, a user name no other process uses,
// and the audit event of each of its requests names it as impersonatedUser. The classification
// of "a request about one object" is internal/audit's, which the benchmark (hack/bench) uses too.

// auditRequest is one API request as the API server logged it; internal/audit classifies it.
type auditRequest = audit.Request

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
	err = audit.Log{Path: harness.auditLog}.Read(u.from, func(r auditRequest) {
		switch {
		case r.User != u.name:
		case r.UserAgent == barrierUA:
			barrier = true
		case strings.HasPrefix(r.UserAgent, uaPrefix):
			out = append(out, r)
		}
	}, `"`+u.name+`"`)
	return out, barrier, err
}

// countByVerb is "verb resource" -> count.
func countByVerb(rs []auditRequest) map[string]int {
	n := map[string]int{}
	for _, r := range rs {
		n[r.Verb+" "+r.Resource()]++
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
