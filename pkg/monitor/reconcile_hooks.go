package monitor

// inNamespace reports whether the records of namespace ns are the pass's:
// all when ReconcileOptions.Namespace is unset (recover --once), one
// namespace's for ps -n NS --refresh. The streams of a pass read cluster-wide
// above ClusterWide namespaces; what they show of another namespace's
// records is the truth and is recorded too, but no record of another
// namespace is judged absent, so no request is made for it.
func (r *reconciler) inNamespace(ns string) bool {
	return r.o.Namespace == "" || r.o.Namespace == ns
}

// flushedHook, when set (tests), is told the kind and size of each batch
// of streamed objects the writer of a pass records, in order.
var flushedHook func(kind string, n int)
