package store

import (
	"context"
	"strings"
	"testing"
	"time"
)

// olderBinary plays a monitor of a binary of schema 7 or older still
// running after a newer binary migrated the database: it holds leases,
// renews each of them (it knows nothing of lease_owners) and takes over a
// lease whose own heartbeat is older than its TTL, which is all it reads.
type olderBinary struct {
	t   *testing.T
	s   *Store
	c   *clock
	own Owner
}

const olderTTL = 15 * time.Second

func (b olderBinary) acquire(ids ...string) {
	b.t.Helper()
	for _, id := range ids {
		if _, err := b.s.db.Exec("INSERT INTO leases (runtime_id, owner, pid, host, heartbeat) VALUES (?, ?, ?, ?, ?)",
			id, b.own.ID, b.own.PID, b.own.Host, toDB(b.c.now())); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b olderBinary) renew() {
	b.t.Helper()
	if _, err := b.s.db.Exec("UPDATE leases SET heartbeat = ? WHERE owner = ?", toDB(b.c.now()), b.own.ID); err != nil {
		b.t.Fatal(err)
	}
}

// wouldTake tells whether the older binary's acquire would take id over
// from its holder: the lease's own heartbeat is older than the TTL.
func (b olderBinary) wouldTake(id string) bool {
	b.t.Helper()
	var beat int64
	if err := b.s.db.QueryRow("SELECT heartbeat FROM leases WHERE runtime_id = ?", id).Scan(&beat); err != nil {
		b.t.Fatal(err)
	}
	return b.c.now().Sub(fromDB(beat)) > olderTTL
}

// leaseBeat is the heartbeat of id's lease row itself.
func leaseBeat(t *testing.T, s *Store, id string) time.Time {
	t.Helper()
	var beat int64
	if err := s.db.QueryRow("SELECT heartbeat FROM leases WHERE runtime_id = ?", id).Scan(&beat); err != nil {
		t.Fatal(err)
	}
	return fromDB(beat)
}

// While a process of an older binary runs beside it, a newer one renews
// each of its leases as well as its owner row, so the older process, which
// reads only the leases' heartbeats, does not take them over a TTL after
// they were acquired. Once the older process is gone (it released its
// leases, or stopped renewing them a minute ago), renewals go back to the
// owner row alone.
func TestRenewLeasesWhileAnOlderBinaryRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		// row: the older process has a lease_owners row, as the migration to
		// schema 8 made for each owner holding leases; without one, it took
		// its leases after the migration pruned its row.
		row bool
		// crash: the older process stops renewing instead of releasing.
		crash bool
	}{
		{"row from the migration, exits", true, false},
		{"no row, exits", false, false},
		{"row from the migration, crashes", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, c := openTest(t)
			me := liveOwner("me")
			old := olderBinary{t: t, s: s, c: c, own: liveOwner("older")}
			old.acquire("x", "y")
			if tc.row {
				if _, err := s.db.Exec("INSERT INTO lease_owners (owner, pid, host, heartbeat) VALUES (?, ?, ?, ?)",
					old.own.ID, old.own.PID, old.own.Host, toDB(c.now())); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := s.AcquireLeases(ctx, me, []string{"a", "b", "x"}, olderTTL); err != nil || len(got) != 2 {
				t.Fatalf("AcquireLeases(me) = %q, %v; want a and b", got, err)
			}
			for i := range 8 { // 40 s, well past the TTL of me's first heartbeat
				c.add(5 * time.Second)
				old.renew()
				if err := s.RenewLeases(ctx, me); err != nil {
					t.Fatal(err)
				}
				for _, id := range []string{"a", "b"} {
					if old.wouldTake(id) {
						t.Fatalf("renewal %d, t0+%s: the older binary would take %s (lease heartbeat %s)",
							i+1, c.now().Sub(t0), id, leaseBeat(t, s, id).Sub(t0))
					}
				}
				if got, err := s.AcquireLeases(ctx, me, []string{"x"}, olderTTL); err != nil || len(got) != 0 {
					t.Fatalf("AcquireLeases(me, x) = %q, %v; want none (the older process renews it)", got, err)
				}
			}

			if tc.crash {
				c.add(olderOwnerWindow)
			} else if _, err := s.db.Exec("DELETE FROM leases WHERE owner = ?", old.own.ID); err != nil {
				t.Fatal(err)
			}
			// The first renewal may still see the older process (its last
			// heartbeat within the window): one more, then none moves the
			// leases.
			c.add(time.Second)
			if err := s.RenewLeases(ctx, me); err != nil {
				t.Fatal(err)
			}
			before := leaseBeat(t, s, "a")
			c.add(5 * time.Second)
			if err := s.RenewLeases(ctx, me); err != nil {
				t.Fatal(err)
			}
			if got := leaseBeat(t, s, "a"); !got.Equal(before) {
				t.Errorf("after the older process went, a renewal set a's lease heartbeat to t0+%s, want it left at t0+%s",
					got.Sub(t0), before.Sub(t0))
			}
			if holder, beat, ok, err := s.LeaseHolder(ctx, "a"); err != nil || !ok || holder != me || !beat.Equal(c.now()) {
				t.Errorf("LeaseHolder(a) = %+v %v %v %v, want me renewed now", holder, beat, ok, err)
			}
		})
	}
}

// Looking for an older binary's process costs a few index searches per
// owner holding leases, at every renewal: no step of its plan reads the
// leases table or its owner index from end to end.
func TestOlderOwnerQueryUsesTheOwnerIndex(t *testing.T) {
	s, _ := openTest(t)
	plan := queryPlan(t, s.db, olderOwnerQuery)
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, "SCAN") && !strings.Contains(line, "owners") && !strings.Contains(line, "CONSTANT ROW") {
			t.Errorf("plan of olderOwnerQuery:\n%s\nwant searches of leases_owner, not %q", plan, line)
		}
	}
	if !strings.Contains(plan, "leases_owner") {
		t.Errorf("plan of olderOwnerQuery:\n%s\nwant searches of leases_owner", plan)
	}
}
