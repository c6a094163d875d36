package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

const (
	benchNS    = "bench"
	benchImage = "registry.invalid/gobrave-bench:1" // kwok never pulls it
	labelHold  = "gobrave.test/hold"                // docs/testing.md: the pod runs until deleted
	// labelLatency marks the jobs of the latency phase (on the Job and its pod template).
	labelLatency = "gobrave.bench/latency"
)

// made is one gobrave workload created in the cluster.
type made struct {
	s   spec.ContainerSpec
	uid string
}

// latencySpecs are n held jobs lat-NNNNN in namespace ns, released later by removing the hold label
// from their pods.
func latencySpecs(n int, ns string) []spec.ContainerSpec {
	specs := make([]spec.ContainerSpec, 0, n)
	for i := range n {
		specs = append(specs, spec.ContainerSpec{Name: fmt.Sprintf("lat-%05d", i), Image: benchImage,
			WorkloadKind: runtimeid.KindJob, RuntimeNamespace: ns, Labels: map[string]string{labelHold: "true", labelLatency: "true"}})
	}
	return specs
}

// parallel runs fn(i) for i in [0,n) on 32 goroutines and joins the errors (the first 5).
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	return parallelN(ctx, n, 32, fn)
}

// parallelN is parallel on workers goroutines.
func parallelN(ctx context.Context, n, workers int, fn func(i int) error) error {
	sem := make(chan struct{}, workers)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if len(errs) < 5 {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errs...)
}

// createGobrave creates the objects as `create` would build them (runtime.Build), with client-go,
// each in its spec's RuntimeNamespace.
func createGobrave(ctx context.Context, c kubernetes.Interface, specs []spec.ContainerSpec) ([]made, error) {
	out := make([]made, len(specs))
	err := parallel(ctx, len(specs), func(i int) error {
		s := specs[i]
		ns := s.RuntimeNamespace
		if err := s.Validate(); err != nil {
			return err
		}
		objs, err := runtime.Build(s, ns)
		if err != nil {
			return err
		}
		var uid string
		switch {
		case objs.Deployment != nil:
			d, err := c.AppsV1().Deployments(ns).Create(ctx, objs.Deployment, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			uid = string(d.UID)
		case objs.Job != nil:
			j, err := c.BatchV1().Jobs(ns).Create(ctx, objs.Job, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			uid = string(j.UID)
		}
		s.Normalize()
		out[i] = made{s: s, uid: uid}
		return nil
	})
	return out, err
}

// record puts every workload in the state database at path as TestRequestCount does: state
// created, event Created.
func record(ctx context.Context, path string, ms []made) error {
	st, err := store.Open(ctx, path)
	if err != nil {
		return err
	}
	for _, m := range ms {
		ns := m.s.RuntimeNamespace
		id, err := runtimeid.New(runtimeid.RuntimeK8s, ns, m.s.Kind(), m.s.Name)
		if err != nil {
			st.Close()
			return err
		}
		w := store.Workload{
			RuntimeID: id.String(), Runtime: runtimeid.RuntimeK8s, Namespace: ns, Kind: id.Kind, Name: m.s.Name,
			UID: m.uid, Spec: m.s, State: store.StateCreated,
		}
		ev := store.Transition{Type: store.Created, Message: id.Kind + "/" + m.s.Name + " created", UID: m.uid}
		if err := st.Put(ctx, w, ev); err != nil {
			st.Close()
			return err
		}
	}
	return st.Close()
}

// copyDB copies a closed database (and its -wal/-shm files, if any) to a new folder.
func copyDB(src, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "state.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		in, err := os.Open(src + suffix)
		if errors.Is(err, os.ErrNotExist) && suffix != "" {
			continue
		}
		if err != nil {
			return "", err
		}
		out, err := os.OpenFile(dst+suffix, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			in.Close()
			return "", err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	}
	return dst, nil
}

// states counts the records of the database at path by state.
func states(ctx context.Context, path string) (map[store.State]int, error) {
	st, err := store.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ws, err := st.List(ctx, store.Filter{All: true, NoSpec: true})
	if err != nil {
		return nil, err
	}
	out := map[store.State]int{}
	for _, w := range ws {
		out[w.State]++
	}
	return out, nil
}

// waitRunning waits until, among the objects of namespace ns matching selector, wantD deployments have a ready
// replica and wantJ jobs a ready pod (polling every 5 s, lightly: the lists are large and the API
// server is busy enough; progress on stderr).
func waitRunning(ctx context.Context, c kubernetes.Interface, ns, selector string, wantD, wantJ int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := ""
	for {
		readyD, readyJ := 0, 0
		ds, err := c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			for _, d := range ds.Items {
				if d.Status.ReadyReplicas == 1 {
					readyD++
				}
			}
		}
		js, err2 := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err2 == nil {
			for _, j := range js.Items {
				if j.Status.Ready != nil && *j.Status.Ready == 1 {
					readyJ++
				}
			}
		}
		if err == nil && err2 == nil && readyD >= wantD && readyJ >= wantJ {
			logf("  %d deployments ready, %d jobs running after %s", readyD, readyJ, time.Since(start).Round(time.Second))
			return nil
		}
		msg := fmt.Sprintf("%d/%d deployments ready, %d/%d jobs running (%v %v)", readyD, wantD, readyJ, wantJ, err, err2)
		if msg != last && time.Since(start) > 5*time.Second {
			logf("  waiting: %s", msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", msg, ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
}
