//go:build unix

// Package handshakebench measures the CPU cost of TLS handshakes of several
// configurations interleaved in one benchmark, so that their ratio survives a noisy
// machine. The tlsconfig, grpccreds and bench benchmarks share it.
package handshakebench

import (
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"
)

// Handshaker performs both ends of one handshake over conns it is given.
type Handshaker struct {
	// Name labels the row; the first Handshaker is the baseline of the ratios.
	Name string
	// Server and Client run the two ends of one handshake.
	Server func(net.Conn) error
	Client func(net.Conn) error
}

// processCPU returns the user plus system CPU time of the whole process: both ends
// of the handshake and the runtime.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func handshakeOnce(b *testing.B, h Handshaker) {
	c, s := net.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- h.Server(s) }()
	cerr := h.Client(c)
	serr := <-errc
	c.Close()
	s.Close()
	if cerr != nil || serr != nil {
		b.Fatalf("%s: client %v, server %v", h.Name, cerr, serr)
	}
}

// Interleave runs b.N rounds; each round does one handshake of every variant, in
// an order shuffled from round to round (so no variant always pays for the garbage
// of the same predecessor), and charges each the process CPU time it took. It
// reports each variant's CPU per handshake relative to the first one, so machine
// noise hits all variants alike and cancels out of the ratios; ratio-ci95 is the
// widest 95% confidence half-width of those ratios (run more rounds, e.g.
// -benchtime=2000x, to narrow it). Allocations per handshake are counted in a
// separate, untimed pass.
//
// The measurement runs on one P with the collector paused (see below), so the CPU
// per handshake it reports is the handshake's own work.
func Interleave(b *testing.B, hs []Handshaker) {
	// One P: the two ends hand off to each other without idle threads spinning for
	// work, whose CPU time would be noise charged to whichever variant runs.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// Collect garbage between rounds, outside the measured windows: a collection
	// costs as much as a handshake and would land on one variant at random, while
	// the variants' allocations (which decide how often collections happen) are
	// reported separately.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, h := range hs { // warm up caches and pools
		handshakeOnce(b, h)
	}
	samples := make([][]float64, len(hs)) // CPU ns per round and variant
	for k := range samples {
		samples[k] = make([]float64, 0, b.N)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := make([]int, len(hs))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%16 == 0 {
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
		}
		for j := range order {
			order[j] = j
		}
		rng.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
		for _, k := range order {
			t0 := processCPU()
			handshakeOnce(b, hs[k])
			samples[k] = append(samples[k], float64(processCPU()-t0))
		}
	}
	b.StopTimer()

	base := sum(samples[0])
	b.ReportMetric(base/float64(b.N)/1e3, hs[0].Name+"-cpu-µs/handshake")
	widest := 0.0
	for k := 1; k < len(hs); k++ {
		r := sum(samples[k]) / base
		b.ReportMetric(r, hs[k].Name+"/"+hs[0].Name)
		widest = max(widest, ci95(samples[k], samples[0], r))
	}
	if b.N > 1 {
		b.ReportMetric(widest, "ratio-ci95")
	}
	baseAllocs := allocsPerHandshake(b, hs[0])
	for k := 1; k < len(hs); k++ {
		b.ReportMetric(allocsPerHandshake(b, hs[k])-baseAllocs, hs[k].Name+"-extra-allocs/handshake")
	}
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// ci95 is the 95% half-width of the ratio r = sum(v)/sum(s) of paired samples, by
// the delta method: the standard error of mean(v - r*s) divided by mean(s).
func ci95(v, s []float64, r float64) float64 {
	n := float64(len(v))
	ms := sum(s) / n
	var m, m2 float64
	for i := range v {
		d := v[i] - r*s[i]
		m += d
		m2 += d * d
	}
	m /= n
	variance := (m2/n - m*m) * n / (n - 1)
	return 1.96 * math.Sqrt(variance/n) / ms
}

func allocsPerHandshake(b *testing.B, h Handshaker) float64 {
	const n = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		handshakeOnce(b, h)
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / n
}
