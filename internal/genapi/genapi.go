// Package genapi is a Kubernetes API server for memory tests and
// measurements of the plugin at large N: it serves N gobrave workloads
// (half running Deployments svc-NNNNNN, half running Jobs task-NNNNNN, built
// by runtime.Build as `create` builds them, with the gobrave.dev/spec
// annotation and server-side managedFields, as a real API server returns
// them), generating each object as it writes it, so that the server holds
// none of them and the client's memory is what is measured.
//
// It serves paginated lists (limit/continue), watch-lists (sendInitialEvents,
// then the initial-events-end bookmark), plain watches (nothing until the
// client goes) and GETs, for deployments, jobs, pods and replicasets (no
// pods and no ReplicaSets), cluster-wide and per namespace, in JSON; with
// Protobuf, in client-go protobuf to a client that accepts it (as a real API
// server does), and with KeyOrder, lists and watch-lists in the order of
// their keys (namespace, then name), as a real API server's watch cache
// sends them, instead of creation order.
package genapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Server serves N workloads over Namespaces namespaces gen-000, gen-001, ...
// (object i in namespace i mod Namespaces).
type Server struct {
	N          int
	Namespaces int
	// Protobuf serves lists, watches and GETs as protobuf to a client whose
	// Accept header asks for it (client-go's typed clients with
	// ContentType protobuf, as the plugin and the controllers use).
	Protobuf bool
	// KeyOrder serves lists and watch-lists in key order (namespace, then
	// name) instead of creation order (object i).
	KeyOrder bool
	// Requests counts the requests served.
	Requests atomic.Int64
}

// Object is the i-th workload: even ones deployments, odd ones jobs.
func (s *Server) Object(i int) (kind, ns, name, uid string) {
	ns = fmt.Sprintf("gen-%03d", i%max(s.Namespaces, 1))
	if i%2 == 0 {
		return runtimeid.KindDeployment, ns, fmt.Sprintf("svc-%06d", i), fmt.Sprintf("uid-d-%06d", i)
	}
	return runtimeid.KindJob, ns, fmt.Sprintf("task-%06d", i), fmt.Sprintf("uid-j-%06d", i)
}

// Seed records every workload in st as created (not yet started), with its UID.
func (s *Server) Seed(ctx context.Context, st *store.Store) error {
	for i := range s.N {
		kind, ns, name, uid := s.Object(i)
		id := runtimeid.ID{Runtime: runtimeid.RuntimeK8s, Namespace: ns, Kind: kind, Name: name}
		w := store.Workload{RuntimeID: id.String(), Runtime: id.Runtime, Namespace: ns, Kind: kind, Name: name, UID: uid, State: store.StateCreated}
		if err := st.Put(ctx, w, store.Transition{Type: store.Created, UID: uid}); err != nil {
			return err
		}
	}
	return nil
}

// managedFields are what a real API server adds to a created workload: the
// creator's fields and the controller's status.
func managedFields(kind string) []metav1.ManagedFieldsEntry {
	at := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	spec := `{"f:metadata":{"f:annotations":{".":{},"f:gobrave.dev/spec":{}},"f:labels":{".":{},"f:app":{},"f:gobrave-workload":{}}},"f:spec":{"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:gobrave-workload":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"x\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}}`
	status := `{"f:status":{"f:active":{},"f:ready":{},"f:availableReplicas":{},"f:conditions":{".":{},"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:lastUpdateTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Progressing\"}":{".":{},"f:lastTransitionTime":{},"f:lastUpdateTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:observedGeneration":{},"f:readyReplicas":{},"f:replicas":{},"f:updatedReplicas":{}}}`
	return []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-gobrave", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(spec)}},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(status)}, Subresource: "status"},
	}
}

// object builds the i-th workload, running.
func (s *Server) object(i int) any {
	kind, ns, name, uid := s.Object(i)
	cs := spec.ContainerSpec{Name: name, Image: "registry.invalid/gobrave-gen:1", WorkloadKind: kind, RuntimeNamespace: ns,
		Env: map[string]string{"MODE": "generated"}}
	objs, err := runtime.Build(cs, ns)
	if err != nil {
		panic(fmt.Sprintf("genapi: build %s: %v", name, err))
	}
	created := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if d := objs.Deployment; d != nil {
		d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		d.UID, d.ResourceVersion, d.Generation, d.CreationTimestamp = types.UID(uid), "10", 1, created
		d.ManagedFields = managedFields(kind)
		d.Spec.Replicas = ptr.To(int32(1))
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: "True", LastUpdateTime: created, LastTransitionTime: created, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: "True", LastUpdateTime: created, LastTransitionTime: created, Reason: "NewReplicaSetAvailable", Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", name+"-5d8f7c9b6")},
			}}
		return d
	}
	j := objs.Job
	j.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	j.UID, j.ResourceVersion, j.Generation, j.CreationTimestamp = types.UID(uid), "10", 1, created
	j.ManagedFields = managedFields(kind)
	j.Status = batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1)), StartTime: &created}
	return j
}

var resources = map[string][2]string{
	"deployments": {"apps/v1", "Deployment"}, "jobs": {"batch/v1", "Job"},
	"pods": {"v1", "Pod"}, "replicasets": {"apps/v1", "ReplicaSet"},
}

// indexes are the object numbers of resource in namespace ns ("" all), in
// creation order, or in key order with KeyOrder.
func (s *Server) indexes(resource, ns string) []int {
	var out []int
	for i := range s.N {
		kind, ons, _, _ := s.Object(i)
		if ns != "" && ons != ns {
			continue
		}
		if resource == "deployments" && kind == runtimeid.KindDeployment || resource == "jobs" && kind == runtimeid.KindJob {
			out = append(out, i)
		}
	}
	if s.KeyOrder {
		keys := make([]string, len(out))
		for k, i := range out {
			_, ns, name, _ := s.Object(i)
			keys[k] = ns + "/" + name
		}
		order := make([]int, len(out))
		for k := range order {
			order[k] = k
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
		sorted := make([]int, len(out))
		for k, o := range order {
			sorted[k] = out[o]
		}
		out = sorted
	}
	return out
}

// protobufCodec encodes the API's objects (the embedded objects of watch
// events, lists, GETs) and frames the watch events as a real API server does
// for client-go protobuf.
var protobufCodec = sync.OnceValue(func() (c struct {
	object, stream kruntime.Serializer
	framer         kruntime.Framer
}) {
	info, ok := kruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), kruntime.ContentTypeProtobuf)
	if !ok || info.StreamSerializer == nil {
		panic("genapi: no protobuf serializer")
	}
	c.object, c.stream, c.framer = info.Serializer, info.StreamSerializer.Serializer, info.StreamSerializer.Framer
	return c
})

// wantsProtobuf: the server serves protobuf and the client accepts it for
// whole objects (not the metadata client's PartialObjectMetadata).
func (s *Server) wantsProtobuf(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return s.Protobuf && strings.Contains(a, kruntime.ContentTypeProtobuf) && !strings.Contains(a, "as=")
}

// list is a List of resource holding objects.
func list(resource, cont string, objs []any) kruntime.Object {
	meta := metav1.ListMeta{ResourceVersion: "10", Continue: cont}
	switch resource {
	case "deployments":
		l := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"}, ListMeta: meta}
		for _, o := range objs {
			l.Items = append(l.Items, *o.(*appsv1.Deployment))
		}
		return l
	case "jobs":
		l := &batchv1.JobList{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "JobList"}, ListMeta: meta}
		for _, o := range objs {
			l.Items = append(l.Items, *o.(*batchv1.Job))
		}
		return l
	case "pods":
		return &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: meta}
	}
	return &appsv1.ReplicaSetList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSetList"}, ListMeta: meta}
}

// bookmark is the initial-events-end bookmark of resource.
func bookmark(resource string) kruntime.Object {
	m := metav1.ObjectMeta{ResourceVersion: "10", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}
	gv := resources[resource]
	tm := metav1.TypeMeta{APIVersion: gv[0], Kind: gv[1]}
	switch resource {
	case "deployments":
		return &appsv1.Deployment{TypeMeta: tm, ObjectMeta: m}
	case "jobs":
		return &batchv1.Job{TypeMeta: tm, ObjectMeta: m}
	case "pods":
		return &corev1.Pod{TypeMeta: tm, ObjectMeta: m}
	}
	return &appsv1.ReplicaSet{TypeMeta: tm, ObjectMeta: m}
}

// serveProtobuf serves a request as protobuf (see Protobuf).
func (s *Server) serveProtobuf(w http.ResponseWriter, r *http.Request, resource, name string, idx []int) {
	c := protobufCodec()
	q := r.URL.Query()
	switch {
	case name != "":
		for _, i := range idx {
			if _, _, n, _ := s.Object(i); n == name {
				w.Header().Set("Content-Type", kruntime.ContentTypeProtobuf)
				_ = c.object.Encode(s.object(i).(kruntime.Object), w)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		w.Header().Set("Content-Type", kruntime.ContentTypeProtobuf+";stream=watch")
		fw := c.framer.NewFrameWriter(w)
		var buf bytes.Buffer
		event := func(typ string, obj kruntime.Object) {
			buf.Reset()
			if err := c.object.Encode(obj, &buf); err != nil {
				panic(fmt.Sprintf("genapi: encode: %v", err))
			}
			_ = c.stream.Encode(&metav1.WatchEvent{Type: typ, Object: kruntime.RawExtension{Raw: buf.Bytes()}}, fw)
		}
		if q.Get("sendInitialEvents") == "true" {
			for _, i := range idx {
				event("ADDED", s.object(i).(kruntime.Object))
			}
			event("BOOKMARK", bookmark(resource))
		}
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		<-r.Context().Done()
	default:
		page, cont := listPage(q, idx)
		objs := make([]any, 0, len(page))
		for _, i := range page {
			objs = append(objs, s.object(i))
		}
		w.Header().Set("Content-Type", kruntime.ContentTypeProtobuf)
		_ = c.object.Encode(list(resource, cont, objs), w)
	}
}

// listPage is the page of idx a paginated list asks for (its limit and
// continue parameters: the continue token is the index of the page's
// first object) and the token of the next page ("" after the last).
func listPage(q url.Values, idx []int) (page []int, cont string) {
	from, _ := strconv.Atoi(q.Get("continue"))
	from = min(max(from, 0), len(idx))
	limit, _ := strconv.Atoi(q.Get("limit"))
	to := len(idx)
	if limit > 0 && from+limit < to {
		to = from + limit
	}
	if to < len(idx) {
		cont = strconv.Itoa(to)
	}
	return idx[from:to], cont
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1[/namespaces/NS]/RESOURCE[/NAME], /apis/G/V[/namespaces/NS]/RESOURCE[/NAME]
	var resource, name, ns string
	for i, p := range parts {
		if p == "namespaces" && i+1 < len(parts) {
			ns = parts[i+1]
		}
		if _, ok := resources[p]; ok && (i == 0 || parts[i-1] != "namespaces") {
			resource = p
			if i+1 < len(parts) {
				name = parts[i+1]
			}
		}
	}
	gv, ok := resources[resource]
	if !ok {
		http.NotFound(w, r)
		return
	}
	idx := s.indexes(resource, ns)
	if s.wantsProtobuf(r) {
		s.serveProtobuf(w, r, resource, name, idx)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	enc := json.NewEncoder(w)
	switch {
	case name != "":
		for _, i := range idx {
			if _, _, n, _ := s.Object(i); n == name {
				_ = enc.Encode(s.object(i))
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_ = enc.Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		fl, _ := w.(http.Flusher)
		if q.Get("sendInitialEvents") == "true" {
			for _, i := range idx {
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": s.object(i)})
			}
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"apiVersion": gv[0], "kind": gv[1],
				"metadata": map[string]any{"resourceVersion": "10", "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		}
		if fl != nil {
			fl.Flush()
		}
		<-r.Context().Done()
	default:
		page, cont := listPage(q, idx)
		fmt.Fprintf(w, `{"apiVersion":%q,"kind":%q,"metadata":{"resourceVersion":"10","continue":%q},"items":[`, gv[0], gv[1]+"List", cont)
		for k, i := range page {
			if k > 0 {
				fmt.Fprint(w, ",")
			}
			b, _ := json.Marshal(s.object(i))
			_, _ = w.Write(b)
		}
		fmt.Fprint(w, "]}")
	}
}
