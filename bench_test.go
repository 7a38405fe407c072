package hotcert_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
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

// BenchmarkNonAtomicWriteToServe measures a writer that rewrites files in place
// (truncate, then two writes), one after the other: the certificate, then the key
// 5 ms later. It reports the time from
// the key write (the last write) to the Reloader's store holding the new pair, with
// default settle and poll settings, as min, median and p99 in milliseconds over b.N
// rotations (goal on an idle machine: p99 ≤ 50 ms; run with -benchtime=50x or more).
func BenchmarkNonAtomicWriteToServe(b *testing.B) {
	dir := b.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := hotcerttest.MustNewCA()
	leaves := []*hotcerttest.Leaf{ca.MustIssue(), ca.MustIssue()}
	write := func(path string, data []byte) {
		if err := hotcerttest.WriteFileNonAtomic(path, data); err != nil {
			b.Fatal(err)
		}
	}
	write(crt, leaves[0].ChainPEM)
	write(key, leaves[0].KeyPEM)
	src, err := file.New(file.WithKeyPair(crt, key))
	if err != nil {
		b.Fatal(err)
	}
	r, err := hotcert.New(context.Background(), src) // default settle and poll
	if err != nil {
		b.Fatal(err)
	}
	go r.Start(context.Background())
	defer r.Close()

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		next := leaves[(i+1)%2]
		want := hotcert.FingerprintOf(next.Cert)
		write(crt, next.ChainPEM)
		time.Sleep(5 * time.Millisecond)
		wrote := time.Now() // the last write starts
		write(key, next.KeyPEM)
		deadline := wrote.Add(10 * time.Second)
		for r.Current().LeafFingerprint() != want {
			if time.Now().After(deadline) {
				b.Fatalf("rotation %d not served within 10 s", i)
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(wrote))
	}
	b.StopTimer()
	testutil.ReportLatencies(b, lat)
}
