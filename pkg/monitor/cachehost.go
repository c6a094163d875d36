package monitor

import "strings"

// The workload informers' cache entries of subscribed objects live in the
// subscriptions (subscription.e): at 100,000 IDs a wentry of 48 bytes and
// a wstore map entry each (about 8 MB) became 48 more bytes in each
// subscription. An object has at most one hosted entry: in the
// subscription of the first runtime (Monitor.runtimes) that has it when it
// is stored; when that subscription finishes, the entry moves to another
// runtime's subscription of the object, or back into the wstore's own map.
// Everything here is under m.mu, which is the wstores' lock too.

// subsHost is the Monitor as the wstores' entryHost.
type subsHost struct{ m *Monitor }

func (h subsHost) Lock()   { h.m.mu.Lock() }
func (h subsHost) Unlock() { h.m.mu.Unlock() }

func (h subsHost) hostLocked(kind, ns, name string, adopt bool) *wentry {
	m := h.m
	var first *subscription
	for _, rt := range m.runtimes {
		if sub := m.lookupLocked(rt, ns, kind, name); sub != nil {
			if sub.e.hosted {
				return &sub.e
			}
			if first == nil {
				first = sub
			}
		}
	}
	if !adopt || first == nil {
		return nil
	}
	first.e.hosted = true
	return &first.e
}

func (h subsHost) eachHostedLocked(kind, ns string, fn func(e *wentry, ns, name string)) {
	for sub := range h.m.subs.all() {
		if !sub.e.hosted {
			continue
		}
		if sns, skind, name := sub.parts(); skind == kind && (ns == "" || sns == ns) {
			fn(&sub.e, sns, name)
		}
	}
}

// cacheKey is the key of sub's object in a wstore's own map: the
// substring of its ID after the runtime.
func cacheKey(sub *subscription) string {
	return sub.id[strings.IndexByte(sub.id, '-')+1:]
}

// wstoreLocked is the store of the workload informer serving the object
// kind in ns, or nil: the namespace's, else the cluster-wide one.
func (m *Monitor) wstoreLocked(ns, kind string) *wstore {
	var buf [128]byte
	b := append(buf[:0], ns...)
	b = append(b, '|')
	b = append(b, kind...)
	if ws := m.wstores[string(b)]; ws != nil && !ws.dead {
		return ws
	}
	if ws := m.wstores[string(b[len(ns):])]; ws != nil && !ws.dead {
		return ws
	}
	return nil
}

// adoptCachedLocked moves the entry of sub's object from its wstore's own
// map (stored before sub was added) into sub.
func (m *Monitor) adoptCachedLocked(sub *subscription) {
	ns, kind, _ := sub.parts()
	ws := m.wstoreLocked(ns, kind)
	if ws == nil {
		return
	}
	key := cacheKey(sub)
	if e := ws.items[key]; e != nil {
		sub.e = *e
		sub.e.hosted = true
		delete(ws.items, key)
	}
}

// unhostLocked moves the entry sub hosts, if any, to another runtime's
// subscription of its object or into its wstore's own map: sub is being
// dropped, the object stays cached (an ID added again finds it there).
func (m *Monitor) unhostLocked(sub *subscription) {
	if !sub.e.hosted {
		return
	}
	e := sub.e
	sub.e = wentry{}
	ns, kind, name := sub.parts()
	for _, rt := range m.runtimes {
		if o := m.lookupLocked(rt, ns, kind, name); o != nil && o != sub {
			o.e = e
			return
		}
	}
	if ws := m.wstoreLocked(ns, kind); ws != nil {
		e.hosted = false
		ws.items[cacheKey(sub)] = &e
	}
}
