package cmd_test

import (
	"strings"
	"testing"
)

// TestOtherClusterRefused: after the current context moved to another
// cluster, verbs on a record made before are refused with both clusters
// named, monitors leave it alone with a warning, and adopt of the same
// object (same UID) on the new cluster takes it over.
func TestOtherClusterRefused(t *testing.T) {
	h := newHarness(t)
	h.clusterIDs = map[string]string{"": "https://a:6443 (ca sha256:aaaa)"}
	id := strings.TrimSpace(h.ok("create", "web", "--image", "nginx:1.27"))
	before := h.history(id)

	h.clusterIDs[""] = "https://b:6443 (ca sha256:bbbb)"
	r := h.run("stop", "web")
	checkExit(t, r, 1, "the current context points at another cluster: the workload was made on https://a:6443 (ca sha256:aaaa), runtime k8s now points at https://b:6443 (ca sha256:bbbb)")
	r = h.run("ps", "--refresh")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: "+id+" was made on https://a:6443") {
		t.Errorf("ps --refresh on another cluster: %s, want a warning", r)
	}
	if after := h.history(id); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("history changed on another cluster: %v -> %v", before, after)
	}

	h.ok("adopt")
	h.ok("stop", "web")
	if got := h.state(id); got != "exited" && got != "stopping" {
		t.Errorf("state %q after stop on the adopted cluster", got)
	}
}
