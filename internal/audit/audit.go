// Package audit reads the API server's audit log (hack/cluster-up.sh
// --audit-log: every request at Metadata level, one JSON line per stage) and
// classifies its requests: which are about one object. The request-count
// guard of the e2e suite (test/e2e, TestRequestCount) and the benchmark
// (hack/bench) both count with it, so that they cannot disagree on what
// "a request per object" is.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Request is one API request as the API server logged it.
type Request struct {
	AuditID, Verb, URI, UserAgent string
	// User is the user the request impersonated ("" when none).
	User string
}

// Path is the URI without its query.
func (r Request) Path() string { p, _, _ := strings.Cut(r.URI, "?"); return p }

// collections are the resource collections Resource names.
var collections = map[string]bool{"pods": true, "jobs": true, "deployments": true, "replicasets": true, "services": true, "namespaces": true, "events": true}

// Resource is the last path element naming a resource collection (pods,
// jobs …), or the path.
func (r Request) Resource() string {
	parts := strings.Split(strings.Trim(r.Path(), "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if collections[parts[i]] {
			return parts[i]
		}
	}
	return r.Path()
}

// perObjectPath matches a request about one named object: a GET/PUT/... of
// .../namespaces/NS/KIND/NAME.
var perObjectPath = regexp.MustCompile(`/namespaces/[^/?]+/[a-z.]+/[^/?]+`)

// perObjectLabels are the label keys whose equality narrows a list or watch
// to the pods (or replica sets) of one workload: the plugin's own label and
// those the controllers set.
var perObjectLabels = map[string]bool{
	"gobrave-workload":                   true,
	"controller-uid":                     true,
	"batch.kubernetes.io/controller-uid": true,
	"job-name":                           true,
	"batch.kubernetes.io/job-name":       true,
	"pod-template-hash":                  true,
}

// PerObject reports whether r is about one named object: its path names it,
// its field selector is metadata.name, or its label selector narrows it to
// one workload.
func (r Request) PerObject() bool {
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

// Log is an audit log file (never rotated).
type Log struct{ Path string }

// Offset is the log's size now: where a later Read starts to see only what
// is logged after.
func (l Log) Offset() (int64, error) {
	fi, err := os.Stat(l.Path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Read calls fn with every request logged from byte offset from on, once
// each (a watch has a ResponseStarted and a ResponseComplete line with one
// auditID), in the order logged. With needles, only the lines that contain
// one of them are decoded: a cheap filter on a log of millions of lines;
// fn decides.
func (l Log) Read(from int64, fn func(Request), needles ...string) error {
	f, err := os.Open(l.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(needles) > 0 && !slices.ContainsFunc(needles, func(n string) bool { return bytes.Contains(line, []byte(n)) }) {
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
			return fmt.Errorf("audit log %s: %w", l.Path, err)
		}
		if seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		r := Request{AuditID: e.AuditID, Verb: e.Verb, URI: e.RequestURI, UserAgent: e.UserAgent}
		if e.ImpersonatedUser != nil {
			r.User = e.ImpersonatedUser.Username
		}
		fn(r)
	}
	return sc.Err()
}
