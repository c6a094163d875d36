package monitor

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/internal/genapi"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// streamAll streams kind from srv through listerFor (with the protobuf
// watch unless typed) and returns the objects, TypeMeta cleared.
func streamAll(t *testing.T, srv *genapi.Server, kind, ns string, typed bool) []kruntime.Object {
	t.Helper()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, ContentConfig: rest.ContentConfig{
		ContentType: kruntime.ContentTypeProtobuf, AcceptContentTypes: kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON}})
	disableProtoWatch = typed
	defer func() { disableProtoWatch = false }()
	l, err := listerFor(c, kind, ns)
	if err != nil {
		t.Fatal(err)
	}
	var out []kruntime.Object
	_, n, err := watchList(context.Background(), l, WorkloadLabel, 10*time.Second, func(o any) error {
		obj := o.(kruntime.Object)
		obj.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind().GroupVersion().WithKind("")) // typed decoding clears it
		out = append(out, obj)
		return nil
	})
	if err != nil || n != len(out) {
		t.Fatalf("watchList: %d objects, %v", n, err)
	}
	return out
}

// TestProtoWatchDecodesAsClientGo: the protobuf watch decodes every object
// of a watch-list exactly as client-go's typed Watch does, ends at the
// bookmark, and decodes a JSON answer as client-go does, in the same request.
func TestProtoWatchDecodesAsClientGo(t *testing.T) {
	for _, kind := range []string{runtimeid.KindDeployment, runtimeid.KindJob} {
		for _, ns := range []string{"", "gen-001"} {
			srv := &genapi.Server{N: 60, Namespaces: 3, Protobuf: true, KeyOrder: true}
			fast := streamAll(t, srv, kind, ns, false)
			if got := srv.Requests.Load(); got != 1 {
				t.Fatalf("protobuf: %d requests, want 1", got)
			}
			typed := streamAll(t, srv, kind, ns, true)
			// The same objects, but for their managedFields, which the
			// protobuf watch does not decode (withoutManagedFields).
			want := make([]kruntime.Object, len(typed))
			for i, o := range typed {
				if len(o.(metav1.Object).GetManagedFields()) == 0 {
					t.Fatalf("the typed Watch decoded %s without managedFields: the comparison says nothing", o.(metav1.Object).GetName())
				}
				want[i] = o.DeepCopyObject()
				want[i].(metav1.Object).SetManagedFields(nil)
			}
			if len(fast) == 0 || !cmp.Equal(fast, want) {
				t.Fatalf("%s in %q: protobuf watch %d objects, typed Watch %d, diff %s", kind, ns, len(fast), len(typed), cmp.Diff(want, fast))
			}
			for _, o := range fast {
				if _, ok := o.(*appsv1.Deployment); !ok && kind == runtimeid.KindDeployment {
					t.Fatalf("a %T", o)
				}
				if _, ok := o.(*batchv1.Job); !ok && kind == runtimeid.KindJob {
					t.Fatalf("a %T", o)
				}
			}
			before := srv.Requests.Load()
			srv.Protobuf = false // JSON: client-go's Watch decodes it
			if js := streamAll(t, srv, kind, ns, false); !cmp.Equal(js, typed) {
				t.Fatalf("%s over JSON: %s", kind, cmp.Diff(typed, js))
			}
			if got := srv.Requests.Load() - before; got != 1 {
				t.Fatalf("over JSON: %d requests, want 1", got)
			}
		}
	}
}

// encodeEvent is a protobuf watch event frame as an API server writes it.
func encodeEvent(t *testing.T, typ string, obj kruntime.Object) []byte {
	t.Helper()
	info, _ := kruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), kruntime.ContentTypeProtobuf)
	var raw, out bytes.Buffer
	if err := info.Serializer.Encode(obj, &raw); err != nil {
		t.Fatal(err)
	}
	fw := info.StreamSerializer.Framer.NewFrameWriter(&out)
	if err := info.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: typ, Object: kruntime.RawExtension{Raw: raw.Bytes()}}, fw); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func decoderOf(b []byte) *protoDecoder[*batchv1.Job] {
	r := nopCloser{bytes.NewReader(b)}
	return &protoDecoder[*batchv1.Job]{body: r, r: bufioReader(r), kind: "Job", newObj: func() *batchv1.Job { return &batchv1.Job{} }}
}

// TestProtoDecoderEvents: an ERROR event decodes to its Status, a kind
// other than the watch's is refused, and every truncation of a frame is an
// error, never a panic or an object.
func TestProtoDecoderEvents(t *testing.T) {
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Failure", Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}
	typ, obj, err := decoderOf(encodeEvent(t, "ERROR", st)).Decode()
	if err != nil || typ != watch.Error || obj.(*metav1.Status).Code != 410 || obj.(*metav1.Status).Message != "too old" {
		t.Fatalf("ERROR event: %s %#v %v", typ, obj, err)
	}
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: "d"}}
	if _, _, err := decoderOf(encodeEvent(t, "ADDED", d)).Decode(); err == nil {
		t.Fatal("a Deployment in a watch of jobs decoded")
	}
	j := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u"}}
	frame := encodeEvent(t, "MODIFIED", j)
	typ, obj, err = decoderOf(frame).Decode()
	if err != nil || typ != watch.Modified || obj.(*batchv1.Job).Name != "j" || obj.(*batchv1.Job).UID != "u" {
		t.Fatalf("MODIFIED event: %s %#v %v", typ, obj, err)
	}
	for i := range len(frame) {
		if _, obj, err := decoderOf(frame[:i]).Decode(); err == nil || obj != nil {
			t.Fatalf("frame cut at %d of %d: %v %v", i, len(frame), obj, err)
		}
	}
}

// TestWithoutManagedFields: the managedFields of an object's metadata are
// removed in place and everything else decodes as before, also when the
// metadata's length shrinks to a shorter varint; an object without them is
// left byte for byte.
func TestWithoutManagedFields(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "batch/v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:gobrave-workload":{}}},"f:spec":{"f:suspend":{}}}`)}}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", Labels: map[string]string{"k": "v"}, ManagedFields: mf, Annotations: map[string]string{"x": "y"}},
		Spec:       batchv1.JobSpec{Suspend: ptr.To(true)},
		Status:     batchv1.JobStatus{Active: 1},
	}
	b, err := job.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := job.ObjectMeta.Marshal(); len(m) < 128 {
		t.Fatalf("metadata of %d bytes: the test wants a length of two varint bytes", len(m))
	}
	got, err := withoutManagedFields(b)
	if err != nil {
		t.Fatal(err)
	}
	var out batchv1.Job
	if err := out.Unmarshal(got); err != nil {
		t.Fatal(err)
	}
	want := job.DeepCopy()
	want.ManagedFields = nil
	if !cmp.Equal(&out, want) {
		t.Errorf("decoded without managedFields: %s", cmp.Diff(want, &out))
	}
	if m, _ := want.ObjectMeta.Marshal(); len(m) >= 128 {
		t.Errorf("metadata of %d bytes without managedFields: the varint did not shrink", len(m))
	}

	job.ManagedFields = nil
	b, _ = job.Marshal()
	orig := bytes.Clone(b)
	got, err = withoutManagedFields(b)
	if err != nil || !bytes.Equal(got, orig) {
		t.Errorf("an object without managedFields changed: %v", err)
	}
	if _, err := withoutManagedFields(orig[:len(orig)-3]); err == nil {
		t.Error("a truncated object: no error")
	}
}
