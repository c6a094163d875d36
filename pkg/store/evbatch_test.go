package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// eventRow is an events row as the tests compare it.
type eventRow struct {
	Seq       int64
	RuntimeID string
	Type      string
	Message   string
	UID       string
	Epoch     int
	Observed  bool
}

func eventRows(t testing.TB, s *Store) []eventRow {
	t.Helper()
	rows, err := s.db.QueryContext(context.Background(), "SELECT seq, runtime_id, type, message, uid, epoch, observed FROM events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var r eventRow
		if err := rows.Scan(&r.Seq, &r.RuntimeID, &r.Type, &r.Message, &r.UID, &r.Epoch, &r.Observed); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestApplyBatchMatchesOneByOne (a rapid property) draws transitions (requested and observed,
// about the record's object, another one or none, with retired objects,
// stale epochs, and observations recorded before by another process) over
// a few records, and applies them to two stores filled alike: to one in
// batches of random sizes, to the other one at a time. The results (each
// event's Seq, whether it applied, the record after it), the events rows
// and the records must be the same, and each applied result's Seq must be
// the row it names. A batch inserts its events after it has applied them
// all, deciding from the keys read and its own earlier events whether an
// observed event is one the unique index holds already: a duplicate it
// missed fails the batch, one it invented skips an event the single
// transitions record.
func TestApplyBatchMatchesOneByOne(t *testing.T) {
	dir := t.TempDir()
	// A filled database copied for each store: migrating a new file
	// for each was most of the test's time.
	seed := filepath.Join(dir, "seed.db")
	s, _ := openAt(t, seed)
	ids := fill(t, s, 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		ctx := context.Background()
		open := func(name string) *Store {
			path := filepath.Join(dir, fmt.Sprintf("%s%d.db", name, n))
			copyFile(t, seed, path)
			s, _ := openAt(t, path)
			return s
		}
		batched, single := open("b"), open("s")
		defer batched.Close()
		defer single.Close()
		types := []EventType{
			StartRequested, StopRequested, PauseRequested, ResumeRequested, RestartRequested, DeleteRequested,
			RequestFailed, SpecUpdated, Adopted,
			ContainerStarted, ContainerStarted, ContainerExited, ContainerFailed, ContainerDeleted, ContainerDeleted,
			ContainerPaused, ContainerWaiting, ContainerWaiting,
		}
		at := t0.Add(time.Hour)
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for range steps {
			// Sometimes another process records an observation first.
			if rapid.IntRange(0, 5).Draw(rt, "other") == 0 {
				id := rapid.SampledFrom(ids).Draw(rt, "otherID")
				typ := rapid.SampledFrom([]EventType{ContainerStarted, ContainerExited, ContainerDeleted}).Draw(rt, "otherType")
				for _, s := range []*Store{batched, single} {
					if _, err := s.db.ExecContext(ctx, "INSERT OR IGNORE INTO events (runtime_id, type, message, uid, epoch, observed, time) SELECT runtime_id, ?, 'other', uid, epoch, 1, 0 FROM workloads WHERE runtime_id = ?",
						string(typ), id); err != nil {
						rt.Fatal(err)
					}
				}
			}
			var ts []Transition
			for range rapid.IntRange(1, 12).Draw(rt, "batch") {
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				at = at.Add(time.Second)
				tr := Transition{RuntimeID: id, Type: rapid.SampledFrom(types).Draw(rt, "type"), Time: at,
					Message: fmt.Sprintf("m%d", rapid.IntRange(0, 2).Draw(rt, "msg"))}
				switch rapid.IntRange(0, 3).Draw(rt, "uid") {
				case 1:
					tr.UID = "uid-" + id[len(id)-1:] // not the record's: fill names them uid-0..3
				case 2:
					tr.UID = rapid.SampledFrom([]string{"new-a", "new-b"}).Draw(rt, "newUID")
				}
				if !tr.Type.Observed() && rapid.IntRange(0, 3).Draw(rt, "retire") == 0 {
					tr.Retire = true
				}
				if rapid.IntRange(0, 4).Draw(rt, "epoch") == 0 {
					tr.Epoch = rapid.IntRange(1, 4).Draw(rt, "epochN")
				}
				if tr.Type == ContainerWaiting {
					tr.Reason = rapid.SampledFrom([]string{"ImagePullBackOff", "CrashLoopBackOff"}).Draw(rt, "reason")
				}
				if tr.Type == RequestFailed && rapid.Bool().Draw(rt, "restore") {
					tr.Restore = StateRunning
				}
				ts = append(ts, tr)
			}
			got, err := batched.ApplyBatch(ctx, ts)
			if err != nil {
				rt.Fatalf("ApplyBatch(%+v): %v", ts, err)
			}
			for i, tr := range ts {
				ev, ok, err := single.Apply(ctx, tr)
				if err != nil {
					rt.Fatalf("Apply(%+v): %v", tr, err)
				}
				g := got[i]
				if g.Applied != ok || g.Event.Seq != ev.Seq || !reflect.DeepEqual(g.Event, ev) {
					rt.Fatalf("transition %d of %d (%+v): batched %v %+v, one by one %v %+v", i, len(ts), tr, g.Applied, g.Event, ok, ev)
				}
				if !ok && g.Event.Seq != 0 {
					rt.Fatalf("transition %d not applied with seq %d", i, g.Event.Seq)
				}
				w, err := single.Get(ctx, tr.RuntimeID)
				if err != nil {
					rt.Fatal(err)
				}
				if g.Workload.State != w.State || g.Workload.Epoch != w.Epoch || g.Workload.UID != w.UID || g.Workload.Message != w.Message {
					rt.Fatalf("transition %d (%+v): batched record %s %d %q %q, one by one %s %d %q %q", i, tr,
						g.Workload.State, g.Workload.Epoch, g.Workload.UID, g.Workload.Message, w.State, w.Epoch, w.UID, w.Message)
				}
			}
			rows := eventRows(t, batched)
			if want := eventRows(t, single); !reflect.DeepEqual(rows, want) {
				rt.Fatalf("events after %+v:\nbatched    %+v\none by one %+v", ts, rows, want)
			}
			bySeq := map[int64]eventRow{}
			for _, r := range rows {
				bySeq[r.Seq] = r
			}
			for i, g := range got {
				if !g.Applied {
					continue
				}
				r, ok := bySeq[g.Event.Seq]
				if !ok || r.RuntimeID != g.Event.RuntimeID || r.Type != string(g.Event.Type) || r.Message != g.Event.Message || r.UID != g.Event.UID {
					rt.Fatalf("transition %d: seq %d names %+v, want %s %s %q %q", i, g.Event.Seq, r, g.Event.RuntimeID, g.Event.Type, g.Event.Message, g.Event.UID)
				}
			}
		}
		for _, id := range ids {
			a, err := batched.Get(ctx, id)
			if err != nil {
				rt.Fatal(err)
			}
			b, err := single.Get(ctx, id)
			if err != nil {
				rt.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				rt.Fatalf("%s: batched %+v, one by one %+v", id, a, b)
			}
		}
	})
}

// TestApplyBatchDuplicateInBatch: an observation made twice in one batch
// (a deletion of a deleted record, recorded once per object and epoch) is
// recorded once; the second is not applied and has no Seq.
func TestApplyBatchDuplicateInBatch(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	ids := fill(t, s, 2)
	id := ids[1]
	ts := []Transition{
		{RuntimeID: id, Type: ContainerDeleted, Message: "gone"},
		{RuntimeID: id, Type: ContainerDeleted, Message: "gone again"},
		{RuntimeID: ids[0], Type: ContainerDeleted},
		{RuntimeID: id, Type: ContainerDeleted, Message: "and again"},
	}
	res, err := s.ApplyBatch(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	// The first deletion moves the record (running) to deleted; the second
	// is "a deletion confirmed after that": recorded, unless the same
	// object's deletion is already recorded in this epoch, as here.
	for i, want := range []bool{true, false, true, false} {
		if res[i].Applied != want || (res[i].Event.Seq != 0) != want {
			t.Errorf("transition %d: applied %v seq %d, want applied %v", i, res[i].Applied, res[i].Event.Seq, want)
		}
	}
	rows := eventRows(t, s)
	if len(rows) != 2 || rows[0].Seq != res[0].Event.Seq || rows[0].Message != "gone" || rows[1].Seq != res[2].Event.Seq || rows[1].RuntimeID != ids[0] {
		t.Errorf("events %+v, want one deletion of each record, numbered as the results say", rows)
	}
	// Another batch of the same: nothing new.
	res, err = s.ApplyBatch(ctx, ts[:1])
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Applied || len(eventRows(t, s)) != 2 {
		t.Errorf("the deletion recorded before applied again: %+v", res[0])
	}
}

// TestApplyBatchSeqNeverReused: the events of a batch take the seqs
// AUTOINCREMENT would have given them, after the largest ever given, even
// when the last events were deleted (prune), and an event inserted by
// AUTOINCREMENT afterwards follows them.
func TestApplyBatchSeqNeverReused(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	ids := fill(t, s, 3)
	res, err := s.ApplyBatch(ctx, []Transition{{RuntimeID: ids[1], Type: StopRequested}, {RuntimeID: ids[2], Type: StopRequested}})
	if err != nil {
		t.Fatal(err)
	}
	last := res[1].Event.Seq
	if _, err := s.db.ExecContext(ctx, "DELETE FROM events WHERE seq >= ?", res[0].Event.Seq); err != nil {
		t.Fatal(err)
	}
	res, err = s.ApplyBatch(ctx, []Transition{{RuntimeID: ids[1], Type: ContainerExited}, {RuntimeID: ids[2], Type: ContainerExited}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Event.Seq != last+1 || res[1].Event.Seq != last+2 {
		t.Errorf("seqs %d, %d after %d was deleted, want %d, %d", res[0].Event.Seq, res[1].Event.Seq, last, last+1, last+2)
	}
	var next int64
	err = s.write(ctx, func(tx *sql.Tx) error {
		var err error
		next, err = execEventTx(ctx, tx, ids[0], string(StartRequested), "", "", 2, false, 0, "", nil, nil, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != last+3 {
		t.Errorf("the next AUTOINCREMENT seq is %d, want %d", next, last+3)
	}
}
