package monitor

import (
	"context"
	"fmt"
	"runtime/trace"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
)

// write is the pass's one writer: it records the batches of the workload
// streams (full) one after the other, and gives each back (free).
//
// Only an object that can have pods needs the notes of the pods' and
// ReplicaSets' streams (aux: a waiting reason, a failed job's exit code),
// and most objects of a large pass have none (deployments at 0, suspended
// jobs). So until aux has ended (auxDone; *auxErr is then its error) the
// writer records the objects that cannot have pods by their own status
// (mayHavePods) as they come, and holds back the others: the batches'
// first records overlap the pods' stream instead of waiting for it. Held
// with them is any later object of the same name (a stream tried again
// passes its objects again, and one object's observations are recorded
// in the order they came). Once a kind's held objects fill a batch
// (batchSize), the writer waits for aux, as it did for every batch before:
// what is held stays within a batch a kind, whatever the number of objects.
// Once aux has ended, the held objects are recorded first, then every
// batch as it comes. When aux fails the writer stops and aux's error is the
// pass's; the records written before that hold true observations.
func (r *reconciler) write(ctx context.Context, kinds []string, full <-chan *batch, free chan<- *batch, auxDone <-chan struct{}, auxErr *error) error {
	r.notesDone = false
	// The streams wait for the API server's first answer: the statements
	// of the writer's transactions are prepared meanwhile, not in the
	// first of them.
	reg := trace.StartRegion(ctx, "reconcile prepare")
	err := r.st.PrepareWrites(ctx)
	reg.End()
	if err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	held := make(map[string]*batch, len(kinds))
	keys := map[uint64]struct{}{} // keyHash of every object held
	wait := func() bool {         // waits for aux; false: stop here
		select {
		case <-auxDone:
			if *auxErr != nil {
				return false // aux's error is the pass's
			}
		case <-ctx.Done():
			return false // the first error is aux's, or a stream's
		}
		r.notesDone = true
		return true
	}
	flush := func(b *batch) error {
		reg := trace.StartRegion(ctx, "reconcile flush")
		defer reg.End()
		return r.flush(ctx, b)
	}
	flushHeld := func() error {
		for _, kind := range kinds {
			if b := held[kind]; b != nil {
				if err := flush(b); err != nil {
					return err
				}
			}
		}
		clear(held)
		clear(keys)
		return nil
	}
	for b := range full {
		if !r.notesDone {
			select {
			case <-auxDone:
				if !wait() {
					return nil
				}
			default:
			}
		}
		if r.notesDone {
			if err := flushHeld(); err != nil {
				return err
			}
		} else {
			h := held[b.kind]
			if h == nil {
				h = &batch{kind: b.kind}
				held[b.kind] = h
			}
			r.hold(b, h, keys)
			if len(h.items) >= batchSize {
				if !wait() {
					return nil
				}
				if err := flushHeld(); err != nil {
					return err
				}
			}
		}
		if err := flush(b); err != nil {
			return err
		}
		select {
		case free <- b:
		default:
		}
	}
	if len(keys) > 0 && !r.notesDone && !wait() {
		return nil
	}
	return flushHeld()
}

// hold moves the objects of b that must wait for the notes (those that
// may have pods, and any whose name is held already) to the end of held,
// with their IDs, and keeps the rest in b in their order.
func (r *reconciler) hold(b, held *batch, keys map[uint64]struct{}) {
	n := len(r.o.Runtimes)
	kept := 0
	for i, it := range b.items {
		k := keyHash(b.kind, it.ns, it.name)
		if _, dup := keys[k]; it.pods || dup {
			keys[k] = struct{}{}
			held.items = append(held.items, it)
			held.ids = append(held.ids, b.ids[i*n:(i+1)*n]...)
			continue
		}
		b.items[kept] = it
		copy(b.ids[kept*n:(kept+1)*n], b.ids[i*n:(i+1)*n])
		kept++
	}
	clear(b.items[kept:]) // no strings kept alive past the batch's end
	clear(b.ids[kept*n:])
	b.items, b.ids = b.items[:kept], b.ids[:kept*n]
}

// mayHavePods reports whether a workload's own status leaves room for a
// pod of it, whose note (reconcile's pods' stream: a waiting reason, an
// exit code) its record may need. Only two shapes are known to have none:
// a Deployment that wants no pods and has none, as its controller last saw
// it (observedGeneration caught up, no replicas, none terminating), and a
// suspended Job that has none and never finished one. Anything else may,
// and waits for the notes. The pods' stream is read apart from the
// workloads' anyway: a pod made after a workload's status was written is
// missed by either order.
func mayHavePods(obj any) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		s := o.Status
		idle := o.Spec.Replicas != nil && *o.Spec.Replicas == 0 && s.ObservedGeneration >= o.Generation &&
			s.Replicas == 0 && ptr.Deref(s.TerminatingReplicas, 0) == 0
		return !idle
	case *batchv1.Job:
		s := o.Status
		idle := ptr.Deref(o.Spec.Suspend, false) && s.Active == 0 && s.Failed == 0 && s.Succeeded == 0 &&
			ptr.Deref(s.Ready, 0) == 0 && ptr.Deref(s.Terminating, 0) == 0
		return !idle
	}
	return true
}
