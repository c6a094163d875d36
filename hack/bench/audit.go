package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// auditLog reads the API server's audit log (one JSON event per line and stage, never rotated).
type auditLog struct{ path string }

// request is one API request as the API server saw it.
type request struct {
	Verb, URI, UserAgent string
}

// Path is the URI without its query.
func (r request) Path() string { p, _, _ := strings.Cut(r.URI, "?"); return p }

// perObject matches a request about one named object: a GET/PUT/... of .../NAME, or a list or
// watch narrowed to one name by a field selector.
var perObject = regexp.MustCompile(`/namespaces/[^/?]+/[a-z.]+/[^/?]+|fieldSelector=metadata\.name`)

// PerObject reports whether r is about one named object.
func (r request) PerObject() bool { return perObject.MatchString(r.URI) }

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
	count := map[string]int{}
	for _, r := range rs {
		key := r.Verb + " " + r.Path()
		if r.PerObject() {
			key = r.Verb + " <one object>"
			if strings.Contains(r.URI, "fieldSelector=metadata.name") {
				key = r.Verb + " <one object by fieldSelector>"
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
