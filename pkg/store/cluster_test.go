package store

import (
	"context"
	"errors"
	"testing"
)

func TestClusters(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	a, b := workload("default", "job", "a"), workload("default", "deployment", "b")
	for _, w := range []Workload{a, b} {
		if err := s.Put(ctx, w, Transition{Type: Created}); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.Cluster(ctx, a.RuntimeID); err != nil || c != "" {
		t.Errorf("Cluster before any: %q, %v", c, err)
	}
	if err := s.SetCluster(ctx, a.RuntimeID, "https://one:6443 ca:aa"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCluster(ctx, a.RuntimeID, "https://two:6443 ca:bb"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Cluster(ctx, a.RuntimeID); err != nil || c != "https://two:6443 ca:bb" {
		t.Errorf("Cluster: %q, %v; want the last set", c, err)
	}
	got, err := s.Clusters(ctx, []string{a.RuntimeID, b.RuntimeID, "k8s-x|job|none"})
	if err != nil || len(got) != 1 || got[a.RuntimeID] != "https://two:6443 ca:bb" {
		t.Errorf("Clusters: %v, %v", got, err)
	}
	// Only records have clusters, and a forgotten record takes its along.
	if err := s.SetCluster(ctx, "k8s-x|job|none", "https://one:6443"); err == nil {
		t.Error("SetCluster of an unknown ID succeeded")
	}
	if err := s.Forget(ctx, a.RuntimeID, 1); err != nil && !errors.Is(err, ErrSuperseded) {
		t.Fatal(err)
	}
	if c, _ := s.Cluster(ctx, a.RuntimeID); c != "" {
		t.Errorf("the cluster of a forgotten record: %q", c)
	}
}
