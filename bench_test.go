package hotcert_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// BenchmarkCurrent compares a snapshot read on the handshake path with a bare
// atomic.Pointer.Load, interleaved in one run, and reports the ratio (goal: ≤ 2x,
// 0 allocations).
func BenchmarkCurrent(b *testing.B) {
	r, err := hotcert.New(context.Background(), newMemSource(identity(hotcerttest.MustNewCA().MustIssue())))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var bare atomic.Pointer[hotcert.Material]
	bare.Store(r.Current())

	const rounds, perRound = 20, 1 << 16
	var sink *hotcert.Material
	var tBare, tHot time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for range rounds {
			start := time.Now()
			for range perRound {
				sink = bare.Load()
			}
			tBare += time.Since(start)
			start = time.Now()
			for range perRound {
				sink = r.Current()
			}
			tHot += time.Since(start)
		}
	}
	_ = sink
	n := float64(b.N * rounds * perRound)
	b.ReportMetric(float64(tBare.Nanoseconds())/n, "bare-ns/load")
	b.ReportMetric(float64(tHot.Nanoseconds())/n, "hotcert-ns/load")
	b.ReportMetric(float64(tHot)/float64(tBare), "ratio")
}
