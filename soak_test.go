package hotcert_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

// BenchmarkSoakKubeletRotations rotates a kubelet-style Secret volume (tls.crt,
// tls.key, ca.crt) 10,000 times, alternating good and bad content, while a client
// handshakes with a server of the Reloader without pause. Every good write must be
// served, no bad content ever (zero bad swaps; every handshake verifies and presents
// a good certificate), and every bad write must be reported. It reports goroutines,
// open file descriptors and inotify watches (the most seen) and heap after GC (its
// floor) over the first and over the last tenth of the rotations side by side
// ("-first", "-last"): flat means no leak. -short, or HOTCERT_SOAK_ROTATIONS=n, runs fewer rotations.
// Run with -benchtime=1x: one iteration is the whole soak.
func BenchmarkSoakKubeletRotations(b *testing.B) {
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	if v := os.Getenv("HOTCERT_SOAK_ROTATIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 20 {
			b.Fatalf("HOTCERT_SOAK_ROTATIONS=%q: want a number of at least 20", v)
		}
	}
	for range b.N {
		soak(b, n)
	}
}

// usage is one sample of the process's resources.
type usage struct{ goroutines, fds, inotifyWatches, heapKiB int }

// add folds sample o into the window's figures: the most goroutines, files and
// watches seen, and the smallest heap after GC (its floor: handshakes in flight add
// tens of KiB each to any one sample, a leak raises the floor).
func (u *usage) add(o usage) {
	if u.heapKiB == 0 || o.heapKiB < u.heapKiB {
		u.heapKiB = o.heapKiB
	}
	u.goroutines, u.fds = max(u.goroutines, o.goroutines), max(u.fds, o.fds)
	u.inotifyWatches = max(u.inotifyWatches, o.inotifyWatches)
}

func sampleUsage(b *testing.B) usage {
	runtime.GC()
	runtime.GC() // the second empties what sync.Pools kept through the first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := usage{goroutines: runtime.NumGoroutine(), heapKiB: int(ms.HeapAlloc / 1024)}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatalf("counting open files: %v", err)
	}
	u.fds = len(fds)
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target != "anon_inode:inotify" {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		for _, line := range strings.Split(string(info), "\n") {
			if strings.HasPrefix(line, "inotify wd:") {
				u.inotifyWatches++
			}
		}
	}
	return u
}

// countingObserver counts loads and failures and keeps nothing else, so that the
// soak's own bookkeeping does not grow the heap it measures.
type countingObserver struct{ loads, failures atomic.Int64 }

func (o *countingObserver) ObserveLoad(_ string, _ *hotcert.Material, initial bool) {
	if !initial {
		o.loads.Add(1)
	}
}

func (o *countingObserver) ObserveFailure(string, error) { o.failures.Add(1) }

// soakContent is one write of the volume and what must come of it.
type soakContent struct {
	payload map[string][]byte
	good    *hotcerttest.Leaf // nil: bad content, to be refused
}

func soakContents(ca *hotcerttest.CA) []soakContent {
	bundle := hotcerttest.BundlePEM(ca)
	now := time.Now()
	leaves := make([]*hotcerttest.Leaf, 8)
	for i := range leaves {
		leaves[i] = ca.MustIssue()
	}
	expired := ca.MustIssue(hotcerttest.WithValidity(now.Add(-48*time.Hour), now.Add(-time.Hour)))
	future := ca.MustIssue(hotcerttest.WithValidity(now.Add(365*24*time.Hour), now.Add(400*24*time.Hour)))
	vol := func(cert, key, ca []byte) map[string][]byte {
		return map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca}
	}
	bad := []map[string][]byte{
		vol(leaves[0].ChainPEM, leaves[1].KeyPEM, bundle),                       // key of another certificate
		vol(hotcerttest.Truncate(leaves[2].ChainPEM), leaves[2].KeyPEM, bundle), // cut certificate
		vol(expired.ChainPEM, expired.KeyPEM, bundle),
		vol(future.ChainPEM, future.KeyPEM, bundle), // not valid for a year: re-checked, not served
		vol(leaves[3].ChainPEM, leaves[3].KeyPEM, hotcerttest.Truncate(bundle)),
		vol(leaves[4].ChainPEM, nil, bundle),
	}
	var out []soakContent
	for i, l := range leaves {
		out = append(out, soakContent{payload: vol(l.ChainPEM, l.KeyPEM, bundle), good: l},
			soakContent{payload: bad[i%len(bad)]})
	}
	return out
}

func soak(b *testing.B, rotations int) {
	ca := hotcerttest.MustNewCA()
	contents := soakContents(ca)
	dir := b.TempDir()
	w := hotcerttest.MustNewAtomicWriter(dir)
	w.MustWrite(contents[0].payload)
	good := map[hotcert.Fingerprint]bool{}
	for _, c := range contents {
		if c.good != nil {
			good[hotcert.FingerprintOf(c.good.Cert)] = true
		}
	}

	src, err := file.New(file.WithKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")), file.WithCA(filepath.Join(dir, "ca.crt")))
	if err != nil {
		b.Fatal(err)
	}
	obs := &countingObserver{}
	r, err := hotcert.New(context.Background(), src, hotcert.WithSettle(0), hotcert.WithObserver(obs))
	if err != nil {
		b.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- r.Start(context.Background()) }()

	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsconfig.ServerConfig(r))
	if err != nil {
		b.Fatal(err)
	}
	var servers sync.WaitGroup
	servers.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			servers.Go(func() {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			})
		}
	})

	// Handshakes throughout: every one must verify and present a good certificate.
	var handshakes, badHandshakes atomic.Int64
	var firstBad atomic.Value
	stop := make(chan struct{})
	var clients sync.WaitGroup
	clients.Go(func() {
		cfg := &tls.Config{RootCAs: hotcerttest.Pool(ca), ServerName: "localhost"}
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), cfg)
			if err == nil {
				fp := hotcert.FingerprintOf(c.ConnectionState().PeerCertificates[0])
				c.Close()
				if good[fp] {
					handshakes.Add(1)
					continue
				}
				err = fmt.Errorf("served certificate %s is not a good one", fp)
			}
			badHandshakes.Add(1)
			firstBad.CompareAndSwap(nil, err.Error())
		}
	})

	window := rotations / 10
	var tenths [10]usage
	served, refused := 0, 0
	current := hotcert.FingerprintOf(contents[0].good.Cert)
	b.ResetTimer()
	for i := 1; i <= rotations; i++ {
		c := contents[i%len(contents)]
		failures := obs.failures.Load()
		w.MustWrite(c.payload)
		deadline := time.Now().Add(10 * time.Second)
		if c.good != nil {
			want := hotcert.FingerprintOf(c.good.Cert)
			for r.Current().LeafFingerprint() != want {
				if time.Now().After(deadline) {
					b.Fatalf("rotation %d: good content not served within 10 s", i)
				}
				time.Sleep(100 * time.Microsecond)
			}
			current = want
			served++
		} else {
			for obs.failures.Load() == failures {
				if time.Now().After(deadline) {
					b.Fatalf("rotation %d: bad content not reported within 10 s", i)
				}
				time.Sleep(100 * time.Microsecond)
			}
			refused++
		}
		if got := r.Current().LeafFingerprint(); got != current {
			b.Fatalf("rotation %d: bad swap: serving %s, want %s", i, got, current)
		}
		if i%max(window/10, 1) == 0 {
			tenths[min((i-1)/window, len(tenths)-1)].add(sampleUsage(b))
		}
	}
	first, last := tenths[0], tenths[len(tenths)-1]
	var floors []string
	for _, u := range tenths {
		floors = append(floors, strconv.Itoa(u.heapKiB))
	}
	b.Logf("heap after GC by tenth of the rotations (floor, KiB): %s", strings.Join(floors, " "))
	b.StopTimer()
	close(stop)
	clients.Wait()
	ln.Close()
	servers.Wait()
	r.Close()
	if err := <-started; err != nil {
		b.Errorf("Start: %v", err)
	}

	if n := badHandshakes.Load(); n > 0 {
		b.Errorf("%d handshakes failed or saw a bad certificate; first: %v", n, firstBad.Load())
	}
	if loads := int(obs.loads.Load()); loads != served {
		b.Errorf("%d good writes, %d reloads", served, loads)
	}
	b.ReportMetric(float64(rotations), "rotations")
	b.ReportMetric(float64(served), "good-served")
	b.ReportMetric(float64(refused), "bad-refused")
	b.ReportMetric(0, "bad-swaps") // any bad swap ends the run above
	b.ReportMetric(float64(handshakes.Load()), "handshakes")
	for _, m := range []struct {
		name        string
		first, last int
	}{
		{"goroutines", first.goroutines, last.goroutines},
		{"fds", first.fds, last.fds},
		{"inotify-watches", first.inotifyWatches, last.inotifyWatches},
		{"heap-KiB", first.heapKiB, last.heapKiB},
	} {
		b.ReportMetric(float64(m.first), m.name+"-first")
		b.ReportMetric(float64(m.last), m.name+"-last")
	}
	b.Logf("%d rotations (%d good served, %d bad refused), %d handshakes; first %d vs last %d rotations: goroutines %d/%d, open fds %d/%d, inotify watches %d/%d (most seen), heap after GC %d/%d KiB (floor)",
		rotations, served, refused, handshakes.Load(), window, window,
		first.goroutines, last.goroutines, first.fds, last.fds, first.inotifyWatches, last.inotifyWatches, first.heapKiB, last.heapKiB)
}
