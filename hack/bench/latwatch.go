package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// latwatchMain is the latency phase's clock: a process of its own that does nothing but watch the
// held jobs (one namespace, one label) and print, for each job, when it first saw Complete:
//
//	go run ./hack/bench latwatch -kubeconfig K -namespace bench-000 -selector gobrave.bench/latency
//
// prints "synced" once its cache is synced, then "<job> <lastTransitionTime ns> <seen ns>" lines
// (nanoseconds since the Unix epoch, this machine's clock), until SIGINT or SIGTERM.
//
// The driver's own in-process watch is late by whatever else the driver does at the same time
// (128 goroutines patching the release, reading the monitor's stdout, its large heap's GC); a
// process with a small heap and no other work sees the same events as early as any watcher can.
func latwatchMain(args []string) int {
	fs := flag.NewFlagSet("latwatch", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	ns := fs.String("namespace", "", "namespace of the jobs")
	sel := fs.String("selector", labelLatency, "label selector of the jobs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" || *ns == "" {
		fmt.Fprintln(os.Stderr, "latwatch: -kubeconfig and -namespace are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := newClient(*kubeconfig, "gobrave-bench/1 (latwatch)")
	if err != nil {
		fmt.Fprintln(os.Stderr, "latwatch:", err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	seen := map[string]bool{}
	onJob := func(obj any) {
		now := time.Now()
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		for _, cnd := range j.Status.Conditions {
			if cnd.Type == batchv1.JobComplete && cnd.Status == corev1.ConditionTrue {
				mu.Lock()
				if !seen[j.Name] {
					seen[j.Name] = true
					fmt.Fprintf(out, "%s %d %d\n", j.Name, cnd.LastTransitionTime.UnixNano(), now.UnixNano())
					out.Flush()
				}
				mu.Unlock()
			}
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(*ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = *sel }))
	ji := f.Batch().V1().Jobs().Informer()
	if _, err := ji.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onJob, UpdateFunc: func(_, o any) { onJob(o) },
	}); err != nil {
		fmt.Fprintln(os.Stderr, "latwatch:", err)
		return 1
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ji.HasSynced) {
		fmt.Fprintln(os.Stderr, "latwatch: the job watch did not sync")
		return 1
	}
	mu.Lock()
	fmt.Fprintln(out, "synced")
	out.Flush()
	mu.Unlock()
	<-ctx.Done()
	f.Shutdown()
	return 0
}

// startLatwatch runs latwatch in a process of its own and records what it prints in seen. It
// returns once the process's cache is synced; stop ends the process.
func (s *scale) startLatwatch(ctx context.Context, ns string, mu *sync.Mutex, seen map[string]seenJob) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "latwatch", "-kubeconfig", s.cl.kubeconfig, "-namespace", ns, "-selector", labelLatency)
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	synced := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if line == "synced" {
				close(synced)
				continue
			}
			name, cond, watch, ok := parseLatwatch(line)
			if !ok {
				continue
			}
			mu.Lock()
			if _, dup := seen[name]; !dup {
				seen[name] = seenJob{cond: cond, watch: watch}
			}
			mu.Unlock()
		}
	}()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		_ = cmd.Wait()
	}
	select {
	case <-synced:
		return stop, nil
	case <-done:
		_ = cmd.Wait()
		return nil, fmt.Errorf("latwatch ended before its cache synced")
	case <-time.After(5 * time.Minute):
		stop()
		return nil, fmt.Errorf("latwatch did not sync in 5 minutes")
	}
}

// parseLatwatch reads one "<job> <lastTransitionTime ns> <seen ns>" line of latwatch.
func parseLatwatch(line string) (name string, cond, watch time.Time, ok bool) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return "", time.Time{}, time.Time{}, false
	}
	c, err1 := strconv.ParseInt(f[1], 10, 64)
	w, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", time.Time{}, time.Time{}, false
	}
	return f[0], time.Unix(0, c), time.Unix(0, w), true
}
