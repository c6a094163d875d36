package genapi

import (
	"context"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestProtobufWatchListInKeyOrder: with Protobuf and KeyOrder a client-go
// protobuf client streams every job in key order (namespace, then name),
// the bookmark last, and lists them in pages, all as protobuf.
func TestProtobufWatchListInKeyOrder(t *testing.T) {
	srv := &Server{N: 40, Namespaces: 3, Protobuf: true, KeyOrder: true}
	var types []string
	hs := httptest.NewServer(recording(srv, &types))
	defer hs.Close()
	c := kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, ContentConfig: rest.ContentConfig{
		ContentType: runtime.ContentTypeProtobuf, AcceptContentTypes: runtime.ContentTypeProtobuf}})
	ctx := context.Background()
	w, err := c.BatchV1().Jobs("").Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var keys []string
	for ev := range w.ResultChan() {
		m, err := metaOf(ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == watch.Bookmark {
			if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
				t.Fatalf("bookmark %v", m.GetAnnotations())
			}
			break
		}
		if ev.Type != watch.Added {
			t.Fatalf("event %s %v", ev.Type, ev.Object)
		}
		keys = append(keys, m.GetNamespace()+"/"+m.GetName())
	}
	if len(keys) != 20 || !slices.IsSorted(keys) {
		t.Fatalf("streamed %d jobs, want 20 in key order: %v", len(keys), keys)
	}
	var listed []string
	o := metav1.ListOptions{Limit: 7}
	for {
		l, err := c.BatchV1().Jobs("").List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range l.Items {
			listed = append(listed, j.Namespace+"/"+j.Name)
		}
		if o.Continue = l.Continue; o.Continue == "" {
			break
		}
	}
	if !slices.Equal(listed, keys) {
		t.Fatalf("listed %v, want %v", listed, keys)
	}
	w.Stop()
	hs.Close() // every handler done: types is complete
	for _, ct := range types {
		if ct != runtime.ContentTypeProtobuf && ct != runtime.ContentTypeProtobuf+";stream=watch" {
			t.Fatalf("served %q", ct)
		}
	}
}

func metaOf(o runtime.Object) (metav1.Object, error) { return meta.Accessor(o) }

// recording wraps srv, recording the Content-Type of each answer.
func recording(srv *Server, types *[]string) nethttp.Handler {
	var mu sync.Mutex
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		srv.ServeHTTP(w, r)
		mu.Lock()
		defer mu.Unlock()
		*types = append(*types, w.Header().Get("Content-Type"))
	})
}

// TestListPagesAlike: a paginated list gives every object once, in the
// order of an unpaginated one, in protobuf and in JSON alike; a continue
// token past the end gives an empty last page.
func TestListPagesAlike(t *testing.T) {
	for _, pb := range []bool{true, false} {
		srv := &Server{N: 40, Namespaces: 3, Protobuf: pb, KeyOrder: true}
		hs := httptest.NewServer(srv)
		ct := runtime.ContentTypeJSON
		if pb {
			ct = runtime.ContentTypeProtobuf
		}
		c := kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, ContentConfig: rest.ContentConfig{ContentType: ct, AcceptContentTypes: ct}})
		ctx := context.Background()
		all, err := c.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var want, listed []string
		for _, j := range all.Items {
			want = append(want, j.Namespace+"/"+j.Name)
		}
		o, pages := metav1.ListOptions{Limit: 7}, 0
		for {
			l, err := c.BatchV1().Jobs("").List(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, j := range l.Items {
				listed = append(listed, j.Namespace+"/"+j.Name)
			}
			if o.Continue = l.Continue; o.Continue == "" {
				break
			}
		}
		if len(want) != 20 || !slices.Equal(listed, want) || pages != 3 {
			t.Fatalf("protobuf %v: %d pages %v, want 3 pages of %v", pb, pages, listed, want)
		}
		l, err := c.BatchV1().Jobs("").List(ctx, metav1.ListOptions{Limit: 7, Continue: "99"})
		if err != nil || len(l.Items) != 0 || l.Continue != "" {
			t.Fatalf("protobuf %v: past the end: %d items, continue %q, %v", pb, len(l.Items), l.Continue, err)
		}
		hs.Close()
	}
}
