package monitor

import (
	"encoding/binary"
	"hash/fnv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// WorkloadLabel selects the objects gobrave manages; the informers list and
// watch only those.
const WorkloadLabel = runtime.LabelWorkload

// Observation is what the monitor saw of one object (runtime.Observation):
// each kind maps its status in pkg/runtime.
type Observation = runtime.Observation

// Deleted is the observation of an object that is gone.
var Deleted = runtime.Deleted

// observe maps an object through its kind; an object the informers keep
// compacted carries its observation already.
func observe(obj any) (Observation, bool) {
	if c, ok := obj.(*compacted); ok {
		return c.observation()
	}
	return runtime.Observe(obj)
}

// slim keeps what the monitor reads of an object it reads once (runtime.Slim).
var slim = runtime.Slim

// compacted is what the workload informers keep of an object: its name,
// namespace, UID and resourceVersion (client-go's store and its update
// detection read them), and its observation, mapped by the transform when
// the object arrives and encoded in place: the type as a byte, the times as
// Unix nanoseconds, the exit code as a number, the observation's UID as the
// object's, its message and reason behind one pointer, nil when both are
// empty (a running workload), shared by the entries with the same texts
// (internText). The namespace is one string per namespace (internNamespace),
// not one per object. No ObjectMeta: compacted is a metav1.Object itself,
// so client-go's keys and resource version checks read it without
// allocating one (a 240-byte ObjectMeta for each of the 4-5 keys computed
// per object during a sync). 96 bytes and its strings, where a Deployment or
// a Job slimmed (runtime.Slim) still takes about 2 KiB as Go structs.
// Nothing reads a cached workload object but observe and identity: a late
// subscription reads its observation (snapshot).
type compacted struct {
	name, namespace, uid, rv string
	text                     *obsText // message and reason; nil when both are ""
	started, finished        int64    // UnixNano, when flags say so
	exitCode                 int32
	typ                      uint8 // index in obsTypes
	flags                    uint8 // obsOK, obsExit, obsStarted, obsFinished
}

// obsText is an observation's message and reason.
type obsText struct{ message, reason string }

// Bits of compacted.flags.
const (
	obsOK       = 1 << iota // the kind mapped the object
	obsExit                 // exitCode is set
	obsStarted              // started is set
	obsFinished             // finished is set
)

// obsTypes are the event types of the cached observations, by index:
// the few that the kinds' mappings return, added as they are met.
var (
	obsTypesMu sync.Mutex
	obsTypes   = []store.EventType{""}
)

// typeIndex is the index of t in obsTypes, adding it when new.
func typeIndex(t store.EventType) (uint8, bool) {
	obsTypesMu.Lock()
	defer obsTypesMu.Unlock()
	for i, x := range obsTypes {
		if x == t {
			return uint8(i), true
		}
	}
	if len(obsTypes) > 255 {
		return 0, false
	}
	obsTypes = append(obsTypes, t)
	return uint8(len(obsTypes) - 1), true
}

func typeAt(i uint8) store.EventType {
	obsTypesMu.Lock()
	defer obsTypesMu.Unlock()
	return obsTypes[i]
}

// maxInterned bounds each intern table: past it, new values are kept as
// they come (one copy per object, as without the table), so that a cluster
// whose messages all differ does not grow a table for nothing.
const maxInterned = 4096

// interns are the namespaces and the texts of the cached observations,
// each kept once: 100,000 objects over 100 namespaces keep 100 namespace
// strings, and the completed jobs share one text ("0", Completed), as do
// the failed ones whose condition says the same.
var interns struct {
	sync.Mutex
	namespaces map[string]string
	texts      map[obsText]*obsText
}

// internNamespace is the kept copy of ns.
func internNamespace(ns string) string {
	interns.Lock()
	defer interns.Unlock()
	if s, ok := interns.namespaces[ns]; ok {
		return s
	}
	if interns.namespaces == nil {
		interns.namespaces = map[string]string{}
	}
	if len(interns.namespaces) < maxInterned {
		interns.namespaces[ns] = ns
	}
	return ns
}

// internText is the kept copy of the text (message, reason), nil when both
// are empty.
func internText(message, reason string) *obsText {
	if message == "" && reason == "" {
		return nil
	}
	t := obsText{message, reason}
	interns.Lock()
	defer interns.Unlock()
	if p, ok := interns.texts[t]; ok {
		return p
	}
	p := &t
	if interns.texts == nil {
		interns.texts = map[obsText]*obsText{}
	}
	if len(interns.texts) < maxInterned {
		interns.texts[t] = p
	}
	return p
}

// newCompacted is the cache entry of an object with identity m and
// observation o (ok: the kind mapped it); false when o cannot be encoded
// (its UID is not the object's, which no kind's mapping does).
func newCompacted(m metav1.Object, o Observation, ok bool) (*compacted, bool) {
	c := &compacted{name: m.GetName(), namespace: internNamespace(m.GetNamespace()), uid: string(m.GetUID()), rv: m.GetResourceVersion()}
	if !ok {
		return c, true
	}
	typ, known := typeIndex(o.Type)
	if !known || o.UID != c.uid {
		return nil, false
	}
	c.flags, c.typ, c.text = obsOK, typ, internText(o.Message, o.Reason)
	if o.ExitCode != nil {
		c.flags |= obsExit
		c.exitCode = *o.ExitCode
	}
	if o.StartedAt != nil {
		c.flags |= obsStarted
		c.started = o.StartedAt.UnixNano()
	}
	if o.FinishedAt != nil {
		c.flags |= obsFinished
		c.finished = o.FinishedAt.UnixNano()
	}
	return c, true
}

// observation decodes the cached observation.
func (c *compacted) observation() (Observation, bool) {
	if c.flags&obsOK == 0 {
		return Observation{}, false
	}
	o := Observation{Type: typeAt(c.typ), UID: c.uid}
	if c.text != nil {
		o.Message, o.Reason = c.text.message, c.text.reason
	}
	if c.flags&obsExit != 0 {
		code := c.exitCode
		o.ExitCode = &code
	}
	if c.flags&obsStarted != 0 {
		t := time.Unix(0, c.started).UTC()
		o.StartedAt = &t
	}
	if c.flags&obsFinished != 0 {
		t := time.Unix(0, c.finished).UTC()
		o.FinishedAt = &t
	}
	return o, true
}

// compacted is a metav1.Object: what client-go's stores read of it
// (meta.Accessor: keys, resource versions) is its own fields. It has no
// other metadata: the rest reads as empty and is not kept when set.
var _ metav1.Object = (*compacted)(nil)

func (c *compacted) GetNamespace() string                          { return c.namespace }
func (c *compacted) SetNamespace(ns string)                        { c.namespace = internNamespace(ns) }
func (c *compacted) GetName() string                               { return c.name }
func (c *compacted) SetName(name string)                           { c.name = name }
func (c *compacted) GetGenerateName() string                       { return "" }
func (c *compacted) SetGenerateName(string)                        {}
func (c *compacted) GetUID() types.UID                             { return types.UID(c.uid) }
func (c *compacted) SetUID(uid types.UID)                          { c.uid = string(uid) }
func (c *compacted) GetResourceVersion() string                    { return c.rv }
func (c *compacted) SetResourceVersion(rv string)                  { c.rv = rv }
func (c *compacted) GetGeneration() int64                          { return 0 }
func (c *compacted) SetGeneration(int64)                           {}
func (c *compacted) GetSelfLink() string                           { return "" }
func (c *compacted) SetSelfLink(string)                            {}
func (c *compacted) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (c *compacted) SetCreationTimestamp(metav1.Time)              {}
func (c *compacted) GetDeletionTimestamp() *metav1.Time            { return nil }
func (c *compacted) SetDeletionTimestamp(*metav1.Time)             {}
func (c *compacted) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (c *compacted) SetDeletionGracePeriodSeconds(*int64)          {}
func (c *compacted) GetLabels() map[string]string                  { return nil }
func (c *compacted) SetLabels(map[string]string)                   {}
func (c *compacted) GetAnnotations() map[string]string             { return nil }
func (c *compacted) SetAnnotations(map[string]string)              {}
func (c *compacted) GetFinalizers() []string                       { return nil }
func (c *compacted) SetFinalizers([]string)                        {}
func (c *compacted) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (c *compacted) SetOwnerReferences([]metav1.OwnerReference)    {}
func (c *compacted) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (c *compacted) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// identity is the namespace, name and UID of an object of the informers:
// compacted, or whole.
func identity(obj any) (ns, name, uid string, ok bool) {
	switch o := obj.(type) {
	case *compacted:
		return o.namespace, o.name, o.uid, true
	case metav1.Object:
		return o.GetNamespace(), o.GetName(), string(o.GetUID()), true
	}
	return "", "", "", false
}

// compact is the informers' transform: workload objects become compacted,
// pods and ReplicaSets are slimmed (runtime.SlimPod, runtime.SlimReplicaSet),
// anything else (tombstones) passes unchanged.
func compact(obj any) (any, error) {
	if _, ok := obj.(*compacted); ok {
		return obj, nil
	}
	s, err := slim(obj)
	if err != nil {
		return nil, err
	}
	m, hasMeta := s.(metav1.Object)
	if !hasMeta || !isWorkloadObject(s) {
		return s, nil
	}
	o, ok := runtime.Observe(s)
	if c, encoded := newCompacted(m, o, ok); encoded {
		return c, nil
	}
	return s, nil // kept slimmed, whole
}

// isWorkloadObject reports whether obj is of a workload kind.
func isWorkloadObject(obj any) bool {
	for _, name := range runtimeid.Kinds {
		if k, err := runtime.KindOf(name); err == nil {
			if _, ok := k.Slim(obj); ok {
				return true
			}
		}
	}
	return false
}

// obsHash is a 56-bit hash of an observation (hashOf); 0 is none. A
// subscription keeps the hash of the last observation it enqueued, not the
// observation, to skip repeats: 7 bytes an ID instead of about 100.
type obsHash uint64

// hashOf hashes what Observation.Equal compares, in 56 bits (the top byte
// of a subscription's word is its state or flags). A collision (2^-56)
// would skip one observation, as a repeat.
func hashOf(o Observation) obsHash {
	h := fnv.New64a()
	for _, s := range []string{string(o.Type), o.Message, o.UID, o.Reason} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	var b [9]byte
	num := func(set bool, v int64) {
		b[0] = 0
		if set {
			b[0] = 1
		}
		binary.LittleEndian.PutUint64(b[1:], uint64(v))
		_, _ = h.Write(b[:])
	}
	if o.ExitCode != nil {
		num(true, int64(*o.ExitCode))
	} else {
		num(false, 0)
	}
	for _, t := range []*time.Time{o.StartedAt, o.FinishedAt} {
		if t != nil {
			num(true, t.UnixNano())
		} else {
			num(false, 0)
		}
	}
	return obsHash(max(h.Sum64()&hashBits, 1))
}
