package store

import (
	"context"
	"testing"
)

// The ps of issue 16 at 100,000 records: Rows streams them without loading
// them all. BenchmarkRows100kFirst is the cost of the first row of `ps -a`
// (what a terminal shows first), BenchmarkRows100kAll of every row of `ps -a`,
// BenchmarkRows100kLive of `ps` (the non-terminal two thirds) reading every
// column, BenchmarkRows100kPs of the same rows reading the four fields ps's
// table prints (what `ps` asks of Rows), and
// BenchmarkList100k the slice List builds, for the ratio.
// Run: go test -run '^$' -bench 100k -benchtime 5x ./pkg/store/

func benchRows(b *testing.B, q Query, limit int) {
	ctx := context.Background()
	s, _ := openTest(b)
	fill(b, s, 100_000)
	cpu := cpuTime()
	for b.Loop() {
		n := 0
		for _, err := range s.Rows(ctx, q) {
			if err != nil {
				b.Fatal(err)
			}
			if n++; n == limit {
				break
			}
		}
		if limit > 0 && n != limit {
			b.Fatalf("%d rows", n)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N)/1000, "cpu-ms/op")
}

func BenchmarkRows100kFirst(b *testing.B) {
	benchRows(b, Query{Filter: Filter{All: true, NoSpec: true}}, 1)
}

func BenchmarkRows100kAll(b *testing.B) {
	benchRows(b, Query{Filter: Filter{All: true, NoSpec: true}}, 0)
}

func BenchmarkRows100kLive(b *testing.B) {
	benchRows(b, Query{Filter: Filter{NoSpec: true}}, 0)
}

func BenchmarkRows100kPs(b *testing.B) {
	benchRows(b, Query{Filter: Filter{NoSpec: true}, Fields: FieldRuntimeID | FieldKind | FieldState | FieldCreated}, 0)
}

func BenchmarkRows100kLiveFirst(b *testing.B) {
	benchRows(b, Query{Filter: Filter{NoSpec: true}}, 1)
}

func BenchmarkList100k(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b)
	fill(b, s, 100_000)
	cpu := cpuTime()
	for b.Loop() {
		if _, err := s.List(ctx, Filter{All: true, NoSpec: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N)/1000, "cpu-ms/op")
}
