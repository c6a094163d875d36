package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/gobrave/kubectl-gobrave/internal/audit"
)

// auditLog reads the API server's audit log (one JSON event per line and stage, never rotated);
// the classification of its requests is internal/audit's, shared with the e2e suite's guard.
type auditLog struct{ path string }

// request is one API request as the API server saw it.
type request = audit.Request

// namespaceOfPath finds the namespace in a request's path.
var namespaceOfPath = regexp.MustCompile(`/namespaces/([^/?]+)`)

func (a *auditLog) offset() (int64, error) { return audit.Log{Path: a.path}.Offset() }

// requests returns the requests logged from byte offset from on whose User-Agent starts with one
// of the prefixes, grouped by prefix; each request once.
func (a *auditLog) requests(from int64, prefixes ...string) (map[string][]request, error) {
	out := map[string][]request{}
	needles := make([]string, len(prefixes))
	for i, p := range prefixes {
		needles[i] = `"userAgent":"` + p
	}
	err := audit.Log{Path: a.path}.Read(from, func(r request) {
		for _, p := range prefixes {
			if strings.HasPrefix(r.UserAgent, p) {
				out[p] = append(out[p], r)
				return
			}
		}
	}, needles...)
	return out, err
}

// summarize is "N requests (k per object): verb path ×n, ..." for the report's notes.
func summarize(rs []request) string {
	// With the load spread over namespaces, the same request in each namespace counts as one kind
	// of request: /namespaces/*/.
	nss := map[string]bool{}
	for _, r := range rs {
		if m := namespaceOfPath.FindStringSubmatch(r.Path()); m != nil {
			nss[m[1]] = true
		}
	}
	path := func(r request) string {
		if len(nss) > 1 {
			return namespaceOfPath.ReplaceAllString(r.Path(), "/namespaces/*")
		}
		return r.Path()
	}
	count := map[string]int{}
	for _, r := range rs {
		key := r.Verb + " " + path(r)
		if r.PerObject() {
			key = r.Verb + " <one object>"
			switch {
			case strings.Contains(r.URI, "fieldSelector=metadata.name"):
				key = r.Verb + " <one object by fieldSelector>"
			case strings.Contains(r.URI, "labelSelector="):
				key = r.Verb + " " + path(r) + " <one workload by labelSelector>"
			}
		}
		count[key]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if count[k] == 1 {
			parts = append(parts, k)
		} else {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, count[k]))
		}
	}
	return strings.Join(parts, "; ")
}

func perObjectCount(rs []request) int {
	n := 0
	for _, r := range rs {
		if r.PerObject() {
			n++
		}
	}
	return n
}
