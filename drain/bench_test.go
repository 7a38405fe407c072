package drain_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
)

// BenchmarkReconnectSpread moves 1,000 agent connections onto a new certificate with
// a drain window W, and in the same run restarts the server the way a rollout does.
// It reports the largest number of reconnects in any one-second bucket for both, as a
// multiple of N/W (goal for the drain: ≤ 1.5), and the stream failures seen by agents
// (goal: 0 for the drain). Run with -benchtime=1x.
func BenchmarkReconnectSpread(b *testing.B) {
	const n = 1000
	const window = 5 * time.Second
	for range b.N {
		ca := hotcerttest.MustNewCA()
		first, second := ca.MustIssue(), ca.MustIssue()
		f := newFixture(b, material(b, first, ca), func(s *hotcert.Store) []drain.Option {
			return []drain.Option{drain.WithIdentityDrain(s, window), drain.WithGrace(10 * time.Second)}
		})
		ctx, cancel := context.WithCancel(context.Background())
		agents := make([]*agent, n)
		var wg sync.WaitGroup
		clientLeaf := ca.MustIssue()
		for i := range agents {
			agents[i] = dial(b, f, clientLeaf, ca)
			wg.Go(func() { agents[i].watch(ctx) })
		}
		for _, a := range agents {
			<-a.serials
		}

		// The drain.
		start := time.Now()
		f.store.Set(material(b, second, ca))
		for _, a := range agents {
			<-a.serials
		}
		drainPeak := peakPerSecond(f.hs.since(start))
		var drainFailures int64
		for _, a := range agents {
			drainFailures += a.failures.Swap(0)
		}

		// The storm it replaces: the server restarts, every connection drops at once.
		addr := f.addr
		f.srv.Stop()
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		restarted := drain.NewServer(countingCreds{grpccreds.NewMTLSServer(f.store), &f.conns, f.hs}, func(o ...grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(o...)
			s.RegisterService(&desc, struct{}{})
			return s
		})
		stormStart := time.Now()
		go restarted.Serve(lis)
		for _, a := range agents {
			<-a.serials
		}
		stormPeak := peakPerSecond(f.hs.since(stormStart))
		var stormFailures int64
		for _, a := range agents {
			stormFailures += a.failures.Load()
		}
		cancel()
		restarted.Stop()
		wg.Wait()

		rate := float64(n) / window.Seconds()
		b.ReportMetric(float64(drainPeak), "drain-peak/s")
		b.ReportMetric(float64(drainPeak)/rate, "drain-peak/(N/W)")
		b.ReportMetric(float64(drainFailures), "drain-stream-failures")
		b.ReportMetric(float64(stormPeak), "restart-peak/s")
		b.ReportMetric(float64(stormFailures), "restart-stream-failures")
	}
}

// peakPerSecond returns the largest number of events in any one-second bucket.
func peakPerSecond(offsets []time.Duration) int {
	buckets := map[int]int{}
	peak := 0
	for _, o := range offsets {
		k := int(o / time.Second)
		buckets[k]++
		peak = max(peak, buckets[k])
	}
	return peak
}
