package file_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// BenchmarkKubeletRenameToServe measures the time from the kubelet's atomic step (the
// rename of ..data_tmp over ..data) to the Reloader's store holding the new material,
// with default settings. It reports min, median and p99 in milliseconds over b.N
// rotations (run with -benchtime=200x or more for a stable p99).
func BenchmarkKubeletRenameToServe(b *testing.B) {
	for _, keepOld := range []bool{false, true} {
		name := "kubelet"
		if keepOld {
			name = "old-dir-kept" // the case where certwatcher falls back to its 10 s poll
		}
		b.Run(name, func(b *testing.B) { benchRenameToServe(b, keepOld) })
	}
}

func benchRenameToServe(b *testing.B, keepOld bool) {
	dir := b.TempDir()
	ca := hotcerttest.MustNewCA()
	leaves := []*hotcerttest.Leaf{ca.MustIssue(), ca.MustIssue()}
	var swapAt time.Time
	w := hotcerttest.MustNewAtomicWriter(dir, hotcerttest.WithKeepOld(keepOld),
		hotcerttest.WithBeforeSwap(func() { swapAt = time.Now() }))
	write := func(l *hotcerttest.Leaf) {
		if _, err := w.Write(map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM}); err != nil {
			b.Fatal(err)
		}
	}
	write(leaves[0])
	src, err := file.New(file.WithKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")))
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
		gen := r.Current().Generation()
		write(leaves[(i+1)%2])
		deadline := time.Now().Add(5 * time.Second)
		for r.Current().Generation() == gen {
			if time.Now().After(deadline) {
				b.Fatalf("rotation %d not served within 5 s", i)
			}
			runtime.Gosched()
		}
		lat = append(lat, time.Since(swapAt))
	}
	b.StopTimer()
	testutil.ReportLatencies(b, lat)
}
