package monitor

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StreamObjects calls fn with every object of a workload kind in each of
// namespaces, whatever its labels (a read by name finds an object whose
// gobrave-workload label was removed, and so does this), one at a time
// without keeping them: one watch-list request per namespace (a paginated
// list where the server does not stream lists), or one for all namespaces
// when there are more than DefaultClusterWide of them (one per namespace
// again when RBAC refuses that). A stream that fails transiently is tried
// again within idle, which also bounds the wait for the next object; a
// stream tried again passes its objects again, so fn must be idempotent.
//
// It is how lifecycle.Engine.RecoverAll reads the objects of the records a
// dead process left mid-request: a constant number of requests, whatever
// the number of such records.
func StreamObjects(ctx context.Context, c kubernetes.Interface, kind string, namespaces []string, idle time.Duration, fn func(metav1.Object) error) error {
	if idle <= 0 {
		idle = DefaultSyncTimeout
	}
	each := func(obj any) error {
		m, err := meta.Accessor(obj)
		if err != nil {
			return fmt.Errorf("monitor: a %s streamed: %w", kind, err)
		}
		return fn(m)
	}
	in := func(ns string) error {
		l, err := listerFor(c, kind, ns)
		if err != nil {
			return err
		}
		return retryStream(ctx, idle, func() error { return stream(ctx, c, l, "", idle, each) })
	}
	if len(namespaces) > DefaultClusterWide {
		err := in("")
		if err == nil || !isDenied(err) {
			return err
		}
	}
	for _, ns := range namespaces {
		if err := in(ns); err != nil {
			return err
		}
	}
	return nil
}
