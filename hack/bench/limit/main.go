// Command limit is the physical limit of a recover pass, the floor `make bench` measures gobrave's
// `recover --once` against (docs/performance.md): for deployments and jobs at once, one streaming
// watch-list (sendInitialEvents: the API server's watch cache sends every matching object once, then
// a bookmark marks the end) of the objects with the gobrave-workload label, each object decoded by
// client-go and dropped. No informer, no cache, no mapping, no database; the same transport as the
// plugin (protobuf, client rate limits off). -mode list pages through a LIST (500 a page) instead,
// for servers without watch-list. -namespace names the namespaces, comma-separated, each read in
// turn (as the plugin reads up to 10 namespaces), or "" for one cluster-wide watch-list per kind
// (as the plugin reads more). It prints one JSON line: the objects received and the time taken.
// A program of its own (client-go and the standard library only), so that its RSS is that of a
// minimal client, not of the benchmark driver.
//
//	limit -kubeconfig KUBECONFIG [-namespace bench[,bench-2...] | -namespace ""] [-selector gobrave-workload] [-mode watch-list|list]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// limitUA is the User-Agent of the limit program (hack/bench filters the audit log on it).
const limitUA = "gobrave-bench-limit/"

// limitResult is what the program prints as JSON.
type limitResult struct {
	Mode    string         `json:"mode"`    // watch-list or paginated list
	Objects map[string]int `json:"objects"` // objects received, by kind
	Ms      float64        `json:"ms"`      // process start to the last kind's end of the initial events
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	start := time.Now()
	fs := flag.NewFlagSet("limit", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	nsFlag := fs.String("namespace", "bench", `namespaces of the objects, comma-separated, read one after the other ("": all, cluster-wide)`)
	selector := fs.String("selector", "gobrave-workload", "label selector")
	mode := fs.String("mode", "watch-list", "watch-list, list, or idle (exit at once: the floor of this program's RSS, for the report)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *mode == "idle" {
		return 0
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "limit: %v\n", err)
		return 1
	}
	rc.UserAgent = limitUA + "1"
	rc.QPS, rc.Burst = -1, 0 // no client-side rate limit
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "limit: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res := limitResult{Mode: *mode, Objects: map[string]int{}}
	type kind struct {
		name  string
		watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
		list  func(context.Context, metav1.ListOptions) (string, int, error) // continue token, items
	}
	kinds := []struct {
		name string
		of   func(ns string) kind
	}{
		{"deployments", func(ns string) kind {
			return kind{"deployments", c.AppsV1().Deployments(ns).Watch, func(ctx context.Context, o metav1.ListOptions) (string, int, error) {
				l, err := c.AppsV1().Deployments(ns).List(ctx, o)
				if err != nil {
					return "", 0, err
				}
				return l.Continue, len(l.Items), nil
			}}
		}},
		{"jobs", func(ns string) kind {
			return kind{"jobs", c.BatchV1().Jobs(ns).Watch, func(ctx context.Context, o metav1.ListOptions) (string, int, error) {
				l, err := c.BatchV1().Jobs(ns).List(ctx, o)
				if err != nil {
					return "", 0, err
				}
				return l.Continue, len(l.Items), nil
			}}
		}},
	}
	nss := []string{metav1.NamespaceAll}
	if *nsFlag != "" {
		nss = strings.Split(*nsFlag, ",")
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, kk := range kinds {
		wg.Go(func() { // the kinds at once, the namespaces of each in turn
			total := 0
			var err error
			for _, ns := range nss {
				k := kk.of(ns)
				var n int
				if *mode == "list" {
					n, err = limitList(ctx, k.list, *selector)
				} else {
					n, err = limitWatchList(ctx, k.watch, *selector)
				}
				total += n
				if err != nil {
					err = fmt.Errorf("namespace %q: %w", ns, err)
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Objects[kk.name] = total
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", kk.name, err))
			}
		})
	}
	wg.Wait()
	res.Ms = float64(time.Since(start).Microseconds()) / 1000
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "limit: %v\n", err)
		return 1
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return 0
}

// limitWatchList streams every object once (sendInitialEvents) and returns at the bookmark that
// ends the initial events.
func limitWatchList(ctx context.Context, w func(context.Context, metav1.ListOptions) (watch.Interface, error), selector string) (int, error) {
	wi, err := w(ctx, metav1.ListOptions{
		LabelSelector:        selector,
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		return 0, err
	}
	defer wi.Stop()
	n := 0
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Added:
			n++ // the object is decoded by client-go and dropped here
		case watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return n, nil
			}
		case watch.Error:
			return n, fmt.Errorf("watch error: %v", ev.Object)
		}
	}
	return n, errors.New("the watch ended before the end of the initial events (is the WatchList feature off? try -mode list)")
}

// limitList pages through the objects, 500 a page.
func limitList(ctx context.Context, l func(context.Context, metav1.ListOptions) (string, int, error), selector string) (int, error) {
	n, cont := 0, ""
	for {
		next, items, err := l(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 500, Continue: cont})
		if err != nil {
			return n, err
		}
		n += items
		if next == "" {
			return n, nil
		}
		cont = next
	}
}
