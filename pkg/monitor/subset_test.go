package monitor

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestSubSetModel: random puts, gets and deletes agree with a map, through
// growth and the backward shift of deletion (small tables: long runs that
// wrap around).
func TestSubSetModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	set, model := newSubSet(), map[string]*subscription{}
	for op := range 200_000 {
		id := fmt.Sprintf("k8s-ns%d|job|t%d", r.IntN(4), r.IntN(3000))
		switch r.IntN(3) {
		case 0:
			if model[id] == nil {
				s := &subscription{id: id}
				set.put(s)
				model[id] = s
			}
		case 1:
			set.del(id)
			delete(model, id)
		}
		if got := set.get(id); got != model[id] {
			t.Fatalf("op %d: get(%s) = %p, want %p", op, id, got, model[id])
		}
		if got := set.getBytes([]byte(id)); got != model[id] {
			t.Fatalf("op %d: getBytes(%s) = %p, want %p", op, id, got, model[id])
		}
		if op%10_000 == 0 {
			checkSet(t, &set, model)
		}
	}
	checkSet(t, &set, model)
	for id := range model {
		set.del(id)
	}
	if set.len() != 0 || set.get("k8s-ns0|job|t1") != nil {
		t.Errorf("emptied: len %d", set.len())
	}
}

func checkSet(t *testing.T, set *subSet, model map[string]*subscription) {
	t.Helper()
	if set.len() != len(model) {
		t.Fatalf("len %d, want %d", set.len(), len(model))
	}
	n := 0
	for s := range set.all() {
		if model[s.id] != s {
			t.Fatalf("all yields %s, not in the model", s.id)
		}
		n++
	}
	if n != len(model) {
		t.Fatalf("all yields %d, want %d", n, len(model))
	}
	for id, s := range model {
		if set.get(id) != s {
			t.Fatalf("get(%s) lost", id)
		}
	}
}

// TestSubSetSize: the table is pointers only, at most 13/16 full: 100,000
// subscriptions take 131,072 slots (1 MiB), where the map it replaced took
// about 3.5 MB; a lookup allocates nothing.
func TestSubSetSize(t *testing.T) {
	set := newSubSet()
	for i := range 100_000 {
		set.put(&subscription{id: fmt.Sprintf("k8s-bench-%03d|job|task-%d", i%100, i)})
	}
	if got := uintptr(len(set.slots)) * unsafe.Sizeof(set.slots[0]); got > 1<<20 {
		t.Errorf("100,000 subscriptions take %d bytes of table, want at most 1 MiB", got)
	}
	b := []byte("k8s-bench-007|job|task-7")
	if allocs := testing.AllocsPerRun(100, func() {
		if set.getBytes(b) == nil {
			t.Fatal("lost")
		}
	}); allocs != 0 {
		t.Errorf("a lookup allocates %.0f times", allocs)
	}
}
