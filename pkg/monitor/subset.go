package monitor

import (
	"hash/maphash"
	"iter"
)

// subSet is the subscriptions by runtime ID: an open-addressing hash table
// (linear probing, at most 13/16 full) of pointers, each keyed by its own
// subscription's id. A map[string]*subscription keeps the key's string
// header beside each pointer, 24 bytes a slot and a control byte, in
// tables at most 7/8 full (about 3.5 MB at 100,000 IDs, mon100's profile);
// this is 8 bytes a slot (1 MiB at 100,000).
type subSet struct {
	slots []*subscription // len a power of two, or 0
	n     int
	seed  maphash.Seed
}

func newSubSet() subSet { return subSet{seed: maphash.MakeSeed()} }

func (t *subSet) len() int { return t.n }

// get is the subscription of id, or nil.
func (t *subSet) get(id string) *subscription {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := int(maphash.String(t.seed, id)) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == nil || s.id == id {
			return s
		}
	}
}

// getBytes is get of the ID in b, without a string of it.
func (t *subSet) getBytes(b []byte) *subscription {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := int(maphash.Bytes(t.seed, b)) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == nil || s.id == string(b) {
			return s
		}
	}
}

// put adds s, whose ID must not be in the set.
func (t *subSet) put(s *subscription) {
	if (t.n+1)*16 > len(t.slots)*13 {
		t.grow()
	}
	t.place(s)
	t.n++
}

func (t *subSet) place(s *subscription) {
	mask := len(t.slots) - 1
	i := int(maphash.String(t.seed, s.id)) & mask
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

func (t *subSet) grow() {
	old := t.slots
	t.slots = make([]*subscription, max(8, 2*len(old)))
	for _, s := range old {
		if s != nil {
			t.place(s)
		}
	}
}

// del removes the subscription of id, if any: the slots after it in its
// run move back where their probe sequence allows (no tombstones).
func (t *subSet) del(id string) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := int(maphash.String(t.seed, id)) & mask
	for {
		s := t.slots[i]
		if s == nil {
			return
		}
		if s.id == id {
			break
		}
		i = (i + 1) & mask
	}
	t.slots[i] = nil
	t.n--
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		// The entry at j may move to the hole at i unless its home slot
		// k lies cyclically in (i, j].
		k := int(maphash.String(t.seed, t.slots[j].id)) & mask
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i], t.slots[j] = t.slots[j], nil
			i = j
		}
	}
}

// all yields every subscription, in no order. The set must not change
// while it runs.
func (t *subSet) all() iter.Seq[*subscription] {
	return func(yield func(*subscription) bool) {
		for _, s := range t.slots {
			if s != nil && !yield(s) {
				return
			}
		}
	}
}
