package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recordMain writes the plugin's records of a load already in a cluster (the objects of
// loadShape{n, running}, found by name; their UIDs read with paginated lists) into a new state
// database, as runScale does after creating them: for measuring by hand on a cluster the driver
// left up or could not finish settling.
//
//	go run ./hack/bench record -kubeconfig K -n 100000 -running 1% -namespaces 100 -state-db /tmp/x/state.db
func recordMain(args []string) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	n := fs.Int("n", 0, "workloads of the load")
	running := fs.String("running", "1%", "workloads with pods, as the driver's -running (a share of N or a number)")
	nss := fs.Int("namespaces", 100, "namespaces, as the driver's -namespaces (0 or 1: all in namespace bench)")
	db := fs.String("state-db", "", "the new state database")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r, err := runningOf(*running, *n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "record: %v\n", err)
		return 2
	}
	if err := record2(context.Background(), *kubeconfig, loadShape{n: *n, running: r, nss: *nss}, *db); err != nil {
		fmt.Fprintf(os.Stderr, "record: %v\n", err)
		return 1
	}
	return 0
}

func record2(ctx context.Context, kubeconfig string, l loadShape, db string) error {
	c, err := newClient(kubeconfig, "gobrave-bench/1 (record)")
	if err != nil {
		return err
	}
	uids := map[string]string{}
	opts := metav1.ListOptions{LabelSelector: "gobrave-workload", Limit: 5000}
	for {
		ds, err := c.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return err
		}
		for _, d := range ds.Items {
			uids[d.Namespace+"/deployment/"+d.Name] = string(d.UID)
		}
		if opts.Continue = ds.Continue; opts.Continue == "" {
			break
		}
	}
	for {
		js, err := c.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return err
		}
		for _, j := range js.Items {
			uids[j.Namespace+"/job/"+j.Name] = string(j.UID)
		}
		if opts.Continue = js.Continue; opts.Continue == "" {
			break
		}
	}
	specs, runs := l.specs()
	ms := make([]made, len(specs))
	for i, s := range specs {
		s.Normalize()
		uid, ok := uids[s.RuntimeNamespace+"/"+s.Kind()+"/"+s.Name]
		if !ok {
			return fmt.Errorf("%s/%s is not in namespace %s of the cluster", s.Kind(), s.Name, s.RuntimeNamespace)
		}
		ms[i] = made{s: s, uid: uid}
	}
	return recordLoad(ctx, db, ms, runs)
}
