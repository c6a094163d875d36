package monitor

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// protoObject is a built-in API type with its generated protobuf decoder.
type protoObject interface {
	kruntime.Object
	Unmarshal([]byte) error
}

// protoWatch is the watch of a lister: the request client-go's typed
// Watch makes, whose protobuf events are decoded here straight from each
// frame into a new T. client-go's watch decoder copies each object's bytes
// twice before decoding them (into the event's RawExtension, then into the
// runtime.Unknown of its envelope): a quarter of the bytes recover
// allocates. Only the two envelopes are read here (a WatchEvent: type and
// object; the object's "k8s\x00" runtime.Unknown: kind, raw, encoding);
// the object itself is decoded by its generated Unmarshal, as client-go
// does. A server that answers JSON is decoded as client-go decodes it (in
// the same request); fallback (client-go's Watch) is left for a client
// without a JSON serializer.
func protoWatch[T protoObject](rc *rest.RESTClient, resource, ns, kind string, newObj func() T,
	fallback func(context.Context, metav1.ListOptions) (watch.Interface, error)) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.Watch = true
		body, err := rc.Get().NamespaceIfScoped(ns, ns != "").Resource(resource).
			VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
		if err != nil {
			return nil, err
		}
		br := bufioReader(body)
		reporter := apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")
		if b, err := br.Peek(1); err == nil && b[0] != 0 {
			// Not a protobuf frame (its length's first byte is 0 below
			// 16 MiB): JSON, decoded as client-go's Watch decodes it.
			// The body tells, not the Content-Type: Request.Stream, which
			// keeps client-go's retries, throttling, warnings and error
			// statuses, returns the body without the response's headers
			// (Request.Watch reads them, but decodes through the copies
			// this decoder avoids).
			codecs := scheme.Codecs.WithoutConversion()
			info, ok := kruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), kruntime.ContentTypeJSON)
			if !ok || info.StreamSerializer == nil {
				body.Close()
				return fallback(ctx, o)
			}
			frames := info.StreamSerializer.Framer.NewFrameReader(readCloser{br, body})
			dec := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), codecs.DecoderToVersion(info.Serializer, nil))
			return watch.NewStreamWatcher(dec, reporter), nil
		}
		return watch.NewStreamWatcher(&protoDecoder[T]{body: body, r: br, kind: kind, newObj: newObj}, reporter), nil
	}
}

// maxFrame bounds a watch event: an API server refuses objects above
// 1.5 MiB (etcd's request limit); far above it, the stream is not protobuf.
const maxFrame = 64 << 20

// protoDecoder decodes a protobuf watch stream: length-delimited frames
// (a 4-byte big-endian length) each holding a metav1.WatchEvent.
type protoDecoder[T protoObject] struct {
	body   io.ReadCloser
	r      *bufio.Reader
	buf    []byte // the frame, reused: the generated decoders copy what they keep
	kind   string // the objects' kind: an event of another kind is a Status or an error
	newObj func() T
}

func (d *protoDecoder[T]) Close() { d.body.Close() }

func (d *protoDecoder[T]) Decode() (watch.EventType, kruntime.Object, error) {
	var n [4]byte
	if _, err := io.ReadFull(d.r, n[:]); err != nil {
		return "", nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return "", nil, fmt.Errorf("monitor: a watch event of %d bytes", size)
	}
	if cap(d.buf) < int(size) {
		d.buf = make([]byte, size)
	}
	frame := d.buf[:size]
	if _, err := io.ReadFull(d.r, frame); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", nil, err
	}
	typ, raw, err := watchEventOf(frame)
	if err != nil {
		return "", nil, err
	}
	kind, data, err := unknownOf(raw)
	if err != nil {
		return "", nil, err
	}
	var obj kruntime.Object
	switch kind {
	case d.kind:
		// Nothing here reads an object's managedFields (the informers'
		// transforms and recover drop them): not decoding them saves
		// the allocations of every entry and its fieldsV1 copy, a fifth
		// of what recover allocates at N = 10,000.
		if data, err = withoutManagedFields(data); err != nil {
			return "", nil, fmt.Errorf("monitor: decode a %s: %w", kind, err)
		}
		o := d.newObj()
		if err := o.Unmarshal(data); err != nil {
			return "", nil, fmt.Errorf("monitor: decode a %s: %w", kind, err)
		}
		obj = o
	case "Status":
		s := &metav1.Status{}
		if err := s.Unmarshal(data); err != nil {
			return "", nil, fmt.Errorf("monitor: decode a Status: %w", err)
		}
		obj = s
	default:
		return "", nil, fmt.Errorf("monitor: a watch of %s sent a %q", d.kind, kind)
	}
	switch t := watch.EventType(typ); t {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error:
		return t, obj, nil
	}
	return "", nil, fmt.Errorf("monitor: a watch event of type %q", typ)
}

// protoFields calls fn with each field of a protobuf message: its number,
// and its bytes when length-delimited (varints and fixed-size values are
// skipped).
func protoFields(b []byte, fn func(num int, v []byte) error) error {
	for len(b) > 0 {
		num, typ, value, end, err := protoField(b)
		if err != nil {
			return err
		}
		if typ == protowire.BytesType {
			if err := fn(num, b[value:end]); err != nil {
				return err
			}
		}
		b = b[end:]
	}
	return nil
}

// protoField reads the field at the start of b (protowire): its number,
// its wire type, where its value starts (past the length of a
// length-delimited field) and where the field ends.
func protoField(b []byte) (num int, typ protowire.Type, value, end int, err error) {
	n, typ, k := protowire.ConsumeTag(b)
	if k < 0 {
		return 0, 0, 0, 0, fmt.Errorf("monitor: a malformed protobuf field: %w", protowire.ParseError(k))
	}
	l := protowire.ConsumeFieldValue(n, typ, b[k:])
	if l < 0 {
		return 0, 0, 0, 0, fmt.Errorf("monitor: a malformed protobuf field %d: %w", n, protowire.ParseError(l))
	}
	value = k
	if typ == protowire.BytesType {
		_, p := protowire.ConsumeVarint(b[k:])
		value += p
	}
	return int(n), typ, value, k + l, nil
}

// Field numbers of the generated protobuf of the API types: an object's
// metadata (Deployment, Job, Pod, ReplicaSet, ...: ObjectMeta metadata = 1)
// and ObjectMeta's managedFields.
const (
	objectMetadataField = 1
	managedFieldsField  = 17
)

// withoutManagedFields removes the managedFields from the metadata of
// object b (an API object's protobuf: metadata is its field 1), in place:
// a field is only ever moved towards the start of b, and the metadata's
// new length takes no more bytes than its old one. It returns what is left
// of b. An object without managedFields is left as it is.
func withoutManagedFields(b []byte) ([]byte, error) {
	w := 0 // where the next field kept goes
	for r := 0; r < len(b); {
		num, wire, value, end, err := protoField(b[r:])
		if err != nil {
			return nil, err
		}
		if num != objectMetadataField || wire != protowire.BytesType {
			w += copy(b[w:], b[r:r+end])
			r += end
			continue
		}
		meta := b[r+value : r+end]
		kept, drop := 0, false
		for m := 0; m < len(meta); {
			num, _, _, end, err := protoField(meta[m:])
			if err != nil {
				return nil, err
			}
			if num == managedFieldsField {
				drop = true
			} else {
				kept += end
			}
			m += end
		}
		if !drop {
			w += copy(b[w:], b[r:r+end])
			r += end
			continue
		}
		// The key as it was, then the new length, then the fields kept.
		_, keyLen := binary.Uvarint(b[r:])
		w += copy(b[w:], b[r:r+keyLen])
		w += binary.PutUvarint(b[w:], uint64(kept))
		for m := 0; m < len(meta); {
			num, _, _, end, _ := protoField(meta[m:])
			if num != managedFieldsField {
				w += copy(b[w:], meta[m:m+end])
			}
			m += end
		}
		r += end
	}
	return b[:w], nil
}

// watchEventOf reads a metav1.WatchEvent: type (1), object (2: a
// runtime.RawExtension, whose raw bytes are its field 1).
func watchEventOf(b []byte) (typ string, raw []byte, err error) {
	err = protoFields(b, func(num int, v []byte) error {
		switch num {
		case 1:
			typ = string(v)
		case 2:
			return protoFields(v, func(num int, v []byte) error {
				if num == 1 {
					raw = v
				}
				return nil
			})
		}
		return nil
	})
	return typ, raw, err
}

// protoMagic starts an object encoded by the API server's protobuf serializer.
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// unknownOf reads the envelope of an encoded object (protoMagic, then a
// runtime.Unknown: typeMeta 1 (apiVersion 1, kind 2), raw 2,
// contentEncoding 3, contentType 4): its kind and its bytes.
func unknownOf(b []byte) (kind string, raw []byte, err error) {
	if len(b) < len(protoMagic) || string(b[:len(protoMagic)]) != string(protoMagic) {
		return "", nil, errors.New("monitor: a watch event's object is not protobuf")
	}
	var encoding, contentType string
	err = protoFields(b[len(protoMagic):], func(num int, v []byte) error {
		switch num {
		case 1:
			return protoFields(v, func(num int, v []byte) error {
				if num == 2 {
					kind = string(v)
				}
				return nil
			})
		case 2:
			raw = v
		case 3:
			encoding = string(v)
		case 4:
			contentType = string(v)
		}
		return nil
	})
	if err == nil && (encoding != "" || contentType != "" && contentType != kruntime.ContentTypeProtobuf) {
		err = fmt.Errorf("monitor: a watch event's object in %q %q", contentType, encoding)
	}
	return kind, raw, err
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 32<<10) }

// readCloser reads through a buffered reader and closes its body.
type readCloser struct {
	io.Reader
	io.Closer
}
