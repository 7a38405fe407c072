package file_test

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/source/file"
)

// TestOneVolumeIsReadFromOneGeneration reads a cert-manager-style volume (tls.crt,
// tls.key and ca.crt in one kubelet directory) in a loop while the kubelet swaps it
// as fast as it can and every core is kept busy: every read must hold the three files
// of one write, never the leaf of one write with the bundle of another.
func TestOneVolumeIsReadFromOneGeneration(t *testing.T) {
	dir := t.TempDir()
	type set struct{ crt, key, ca []byte }
	var sets []set
	for range 3 {
		ca := hotcerttest.MustNewCA()
		l := ca.MustIssue()
		sets = append(sets, set{l.ChainPEM, l.KeyPEM, hotcerttest.BundlePEM(ca)})
	}
	w := hotcerttest.MustNewAtomicWriter(dir)
	write := func(s set) {
		if _, err := w.Write(map[string][]byte{"tls.crt": s.crt, "tls.key": s.key, "ca.crt": s.ca}); err != nil {
			t.Error(err)
		}
	}
	write(sets[0])
	src, err := file.New(file.WithKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")), file.WithCA(filepath.Join(dir, "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range runtime.GOMAXPROCS(0) { // CPU contention: the reader is preempted mid-read
		wg.Go(func() {
			for ctx.Err() == nil {
				for i := 0; i < 1e5; i++ {
				}
				runtime.Gosched()
			}
		})
	}
	var swaps atomic.Int64
	wg.Go(func() { // the swap storm
		for i := 1; ctx.Err() == nil; i++ {
			write(sets[i%len(sets)])
			swaps.Add(1)
		}
	})

	const reads = 3000
	var torn, failed int
	for range reads {
		c, err := src.Read(ctx)
		if err != nil {
			failed++ // a read that gave up under the storm is fine; a torn one is not
			continue
		}
		ok := false
		for _, s := range sets {
			if bytes.Equal(c.Cert.Data, s.crt) {
				ok = bytes.Equal(c.Key.Data, s.key) && bytes.Equal(c.CA.Data, s.ca)
			}
		}
		if !ok {
			torn++
		}
	}
	cancel()
	t.Logf("%d reads during %d swaps: %d torn, %d gave up", reads, swaps.Load(), torn, failed)
	if torn != 0 {
		t.Fatalf("%d of %d reads mixed files of different writes", torn, reads)
	}
	if failed > reads/2 {
		t.Fatalf("%d of %d reads gave up: the retry is too eager to fail", failed, reads)
	}
}
