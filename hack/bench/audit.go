package main

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

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// auditLog reads the API server's audit log (one JSON event per line and stage, never rotated).
type auditLog struct{ path string }

// request is one API request as the API server saw it.
type request struct {
	Verb, URI, UserAgent string
}

// Path is the URI without its query.
func (r request) Path() string { p, _, _ := strings.Cut(r.URI, "?"); return p }

// perObjectPath matches a request about one named object: a GET/PUT/... of .../NAME.
var perObjectPath = regexp.MustCompile(`/namespaces/[^/?]+/[a-z.]+/[^/?]+`)

// namespaceOfPath finds the namespace in a request's path.
var namespaceOfPath = regexp.MustCompile(`/namespaces/([^/?]+)`)

// perObjectLabels are the label keys whose equality narrows a list or watch to the pods (or
// replica sets) of one workload: the plugin's own label and those the controllers set.
var perObjectLabels = map[string]bool{
	"gobrave-workload":                   true,
	"controller-uid":                     true,
	"batch.kubernetes.io/controller-uid": true,
	"job-name":                           true,
	"batch.kubernetes.io/job-name":       true,
	"pod-template-hash":                  true,
}

// PerObject reports whether r is about one named object.
func (r request) PerObject() bool {
	path, query, _ := strings.Cut(r.URI, "?")
	if perObjectPath.MatchString(path) {
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
			if perObjectLabels[req.Key()] {
				return true
			}
		}
	}
	return false
}

func (a *auditLog) offset() (int64, error) {
	fi, err := os.Stat(a.path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// requests returns the requests logged from byte offset from on whose User-Agent starts with one
// of the prefixes, grouped by prefix; each request once (a watch has a ResponseStarted and a
// ResponseComplete line).
func (a *auditLog) requests(from int64, prefixes ...string) (map[string][]request, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	out := map[string][]request{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		match := ""
		for _, p := range prefixes {
			if strings.Contains(string(line), `"userAgent":"`+p) {
				match = p
				break
			}
		}
		if match == "" {
			continue
		}
		var e struct {
			AuditID    string `json:"auditID"`
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			UserAgent  string `json:"userAgent"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", a.path, err)
		}
		if !strings.HasPrefix(e.UserAgent, match) || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		out[match] = append(out[match], request{Verb: e.Verb, URI: e.RequestURI, UserAgent: e.UserAgent})
	}
	return out, sc.Err()
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
