package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// listPage bounds the objects of one page of a paginated list: the
// fallback of a watch-list, and the metadata-only lists that confirm an
// absence. Only one page is in memory at a time.
const listPage = 500

// lister reads one resource in one scope ("" = all namespaces): a
// watch-list stream, or a paginated list when the server (or a fake
// clientset) does not stream lists.
type lister struct {
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	// list returns one page: its objects and the continue token.
	list func(context.Context, metav1.ListOptions) ([]any, string, error)
}

// listerFor is the lister of kind (a workload kind, pod or replicaset) in ns.
func listerFor(c kubernetes.Interface, kind, ns string) (lister, error) {
	switch kind {
	case runtimeid.KindJob:
		r := c.BatchV1().Jobs(ns)
		return lister{watch: decodeWatch(c.BatchV1().RESTClient(), "jobs", ns, "Job", func() *batchv1.Job { return &batchv1.Job{} }, r.Watch), list: pages(r.List)}, nil
	case runtimeid.KindDeployment:
		r := c.AppsV1().Deployments(ns)
		return lister{watch: decodeWatch(c.AppsV1().RESTClient(), "deployments", ns, "Deployment", func() *appsv1.Deployment { return &appsv1.Deployment{} }, r.Watch), list: pages(r.List)}, nil
	case kindPod:
		r := c.CoreV1().Pods(ns)
		return lister{watch: decodeWatch(c.CoreV1().RESTClient(), "pods", ns, "Pod", func() *corev1.Pod { return &corev1.Pod{} }, r.Watch), list: pages(r.List)}, nil
	case kindReplicaSet:
		r := c.AppsV1().ReplicaSets(ns)
		return lister{watch: decodeWatch(c.AppsV1().RESTClient(), "replicasets", ns, "ReplicaSet", func() *appsv1.ReplicaSet { return &appsv1.ReplicaSet{} }, r.Watch), list: pages(r.List)}, nil
	}
	return lister{}, fmt.Errorf("monitor: no lister for kind %q", kind)
}

// decodeWatch is the watch of a typed client's resource: protoWatch's
// when the client is a REST client (a real one, which asks for protobuf),
// else its Watch (fake clientsets).
func decodeWatch[T protoObject](rc rest.Interface, resource, ns, kind string, newObj func() T,
	typed func(context.Context, metav1.ListOptions) (watch.Interface, error)) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
	if c, ok := rc.(*rest.RESTClient); ok && c != nil && !disableProtoWatch {
		return protoWatch(c, resource, ns, kind, newObj, typed)
	}
	return typed
}

// disableProtoWatch makes decodeWatch use the typed clients' Watch (tests
// compare the two).
var disableProtoWatch = false

// pages makes a lister's list of a typed (or metadata-only) List: the
// items of one page, each a pointer into the page (meta.ExtractList), and
// the continue token.
func pages[L interface {
	kruntime.Object
	metav1.ListInterface
}](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) ([]any, string, error) {
	return func(ctx context.Context, o metav1.ListOptions) ([]any, string, error) {
		l, err := list(ctx, o)
		if err != nil {
			return nil, "", err
		}
		objs, err := meta.ExtractList(l)
		if err != nil {
			return nil, "", err
		}
		out := make([]any, len(objs))
		for i, o := range objs {
			out[i] = o
		}
		return out, l.GetContinue(), nil
	}
}

// stream calls fn with every object of the lister's resource that selector
// selects, one at a time, without keeping them: one watch-list request
// (sendInitialEvents, ending at the initial-events-end bookmark) when the
// client streams lists, else a list paginated by listPage. idle bounds the
// wait for the next object or the end.
func stream(ctx context.Context, c any, l lister, selector string, idle time.Duration, fn func(any) error) error {
	if !watchlist.DoesClientNotSupportWatchListSemantics(c) {
		_, n, err := watchList(ctx, l, selector, idle, fn)
		// A server that refuses a watch-list (too old, or the feature
		// off) says so before sending anything: list instead.
		if err == nil || n > 0 || !(apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsMethodNotSupported(err)) {
			return err
		}
	}
	return paginate(ctx, l.list, metav1.ListOptions{LabelSelector: selector}, fn)
}

// paginate lists page by page, calling fn on each object.
func paginate(ctx context.Context, list func(context.Context, metav1.ListOptions) ([]any, string, error), o metav1.ListOptions, fn func(any) error) error {
	o.Limit = listPage
	for {
		items, cont, err := list(ctx, o)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if cont == "" {
			return nil
		}
		o.Continue = cont
	}
}

// streamBackoff spaces the tries of a stream that failed transiently (a
// 5xx, a 429, a cut connection, a watch-list cut before its end).
var streamBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 5 * time.Second}

// retryStream runs fn, a whole stream, again while it fails transiently,
// for at most budget (the sync timeout: what a user waits for a cluster
// that does not answer). A stream tried again passes its objects again: its
// callers are idempotent.
func retryStream(ctx context.Context, budget time.Duration, fn func() error) error {
	deadline := time.Now().Add(budget)
	return retry.OnError(streamBackoff, func(err error) bool {
		return ctx.Err() == nil && retriable(err) && time.Now().Before(deadline)
	}, fn)
}

// retriable: transient (see transient), or a watch-list cut before its end.
// A stream that went quiet for its whole idle time is not tried again.
func retriable(err error) bool {
	var idle *idleError
	if errors.As(err, &idle) {
		return false
	}
	return transient(err) || errors.Is(err, errNoBookmark)
}

// idleError is a stream that sent nothing for its idle time.
type idleError struct{ idle time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("no answer within %s: timed out", e.idle)
}

// errNoBookmark is a watch-list that ended before its initial events did.
var errNoBookmark = errors.New("the watch-list ended before the initial-events-end bookmark")

// watchList streams the current objects through one watch request,
// passing each to fn, and returns the resource version of the
// initial-events-end bookmark and how many objects it passed to fn.
func watchList(ctx context.Context, l lister, selector string, idle time.Duration, fn func(any) error) (rv string, n int, err error) {
	// idle bounds the wait for the request's answer too, and for each
	// object after it: a server that never answers fails like an informer
	// that never syncs.
	quiet := &idleError{idle: idle}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(idle, func() { cancel(quiet) })
	defer timer.Stop()
	w, err := l.watch(ctx, metav1.ListOptions{
		LabelSelector:        selector,
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		if context.Cause(ctx) == quiet {
			return "", 0, quiet
		}
		return "", 0, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", n, context.Cause(ctx)
		case ev, ok := <-w.ResultChan():
			if !ok {
				if context.Cause(ctx) == quiet {
					return "", n, quiet
				}
				return "", n, errNoBookmark
			}
			// idle is the server's: the time fn takes (the writer of a
			// pass holding its streams back) does not count.
			timer.Stop()
			switch ev.Type {
			case watch.Added, watch.Modified:
				n++
				if err := fn(ev.Object); err != nil {
					return "", n, err
				}
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					return m.GetResourceVersion(), n, nil
				}
			case watch.Error:
				return "", n, apierrors.FromObject(ev.Object)
			}
			timer.Reset(idle)
		}
	}
}

// metaLister lists the metadata of every object of a kind in a namespace
// (no label selector: an object whose gobrave-workload label was removed
// is still there), page by page.
type metaLister func(ctx context.Context, kind, ns string, fn func(name, uid string) error) error

// metadataLister lists through the metadata-only API (PartialObjectMetadata):
// one watch-list request (a paginated list where the server does not
// stream lists), whatever the number of objects.
func metadataLister(md metadata.Interface, idle time.Duration) metaLister {
	return func(ctx context.Context, kind, ns string, fn func(name, uid string) error) error {
		gvr, err := resourceOf(kind)
		if err != nil {
			return err
		}
		r := md.Resource(gvr).Namespace(ns)
		l := lister{watch: r.Watch, list: pages(r.List)}
		return stream(ctx, md, l, "", idle, func(o any) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			return fn(m.GetName(), string(m.GetUID()))
		})
	}
}

// typedLister lists through the typed client (whole objects): where no
// metadata client is given (tests with a fake clientset).
func typedLister(c kubernetes.Interface, idle time.Duration) metaLister {
	return func(ctx context.Context, kind, ns string, fn func(name, uid string) error) error {
		l, err := listerFor(c, kind, ns)
		if err != nil {
			return err
		}
		return stream(ctx, c, l, "", idle, func(o any) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			return fn(m.GetName(), string(m.GetUID()))
		})
	}
}

// resourceOf is the API resource of a workload kind.
func resourceOf(kind string) (schema.GroupVersionResource, error) {
	switch kind {
	case runtimeid.KindDeployment:
		return appsv1.SchemeGroupVersion.WithResource("deployments"), nil
	case runtimeid.KindJob:
		return batchv1.SchemeGroupVersion.WithResource("jobs"), nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("monitor: no resource for kind %q", kind)
}
