package file_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// fixture runs a Reloader over a file source laid out like two kubelet volumes: the
// key pair in tls/ (a Secret volume) and the bundle in ca/ (a ConfigMap volume).
type fixture struct {
	t      *testing.T
	ca     *hotcerttest.CA
	tlsDir string
	caDir  string
	tlsW   *hotcerttest.AtomicWriter
	caW    *hotcerttest.AtomicWriter
	r      *hotcert.Reloader
	obs    *testutil.Observer
	logs   *testutil.LogBuffer
	leaves []*hotcerttest.Leaf
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{
		t: t, ca: hotcerttest.MustNewCA(),
		tlsDir: filepath.Join(root, "tls"), caDir: filepath.Join(root, "ca"),
		obs: &testutil.Observer{}, logs: &testutil.LogBuffer{},
	}
	f.tlsW = hotcerttest.MustNewAtomicWriter(f.tlsDir)
	f.caW = hotcerttest.MustNewAtomicWriter(f.caDir)
	return f
}

func (f *fixture) leaf(opts ...hotcerttest.Option) *hotcerttest.Leaf {
	l := f.ca.MustIssue(opts...)
	f.leaves = append(f.leaves, l)
	return l
}

func (f *fixture) writePair(cert, key []byte) {
	f.t.Helper()
	if _, err := f.tlsW.Write(map[string][]byte{"tls.crt": cert, "tls.key": key}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) writeLeaf(l *hotcerttest.Leaf) { f.writePair(l.ChainPEM, l.KeyPEM) }

func (f *fixture) writeCA(bundle []byte) {
	f.t.Helper()
	if _, err := f.caW.Write(map[string][]byte{"ca.crt": bundle}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) certPath() string { return filepath.Join(f.tlsDir, "tls.crt") }
func (f *fixture) keyPath() string  { return filepath.Join(f.tlsDir, "tls.key") }
func (f *fixture) caPath() string   { return filepath.Join(f.caDir, "ca.crt") }

func (f *fixture) source(opts ...file.Option) *file.Source {
	f.t.Helper()
	opts = append([]file.Option{
		file.WithKeyPair(f.certPath(), f.keyPath()),
		file.WithCA(f.caPath()),
		file.WithRewatchInterval(20 * time.Millisecond),
	}, opts...)
	s, err := file.New(opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) options(extra ...hotcert.Option) []hotcert.Option {
	return append([]hotcert.Option{
		hotcert.WithLogger(slog.New(slog.NewTextHandler(f.logs, nil))),
		hotcert.WithObserver(f.obs),
		hotcert.WithComponent("agent_grpc"),
		hotcert.WithSettle(50 * time.Millisecond),
		hotcert.WithPollInterval(0), // events only, unless a test says otherwise
	}, extra...)
}

// start creates and starts a Reloader; extra options override the test defaults.
func (f *fixture) start(src hotcert.Source, extra ...hotcert.Option) {
	f.t.Helper()
	r, err := hotcert.New(context.Background(), src, f.options(extra...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.r = r
	done := make(chan error, 1)
	go func() { done <- r.Start(context.Background()) }()
	f.t.Cleanup(func() {
		r.Close()
		if err := <-done; err != nil {
			f.t.Errorf("Start: %v", err)
		}
		if hotcerttest.ContainsKeyMaterial(f.logs.String(), f.leaves...) {
			f.t.Errorf("logs contain key material:\n%s", f.logs.String())
		}
	})
}

func (f *fixture) serving(l *hotcerttest.Leaf) bool {
	return f.r.Current().Leaf().SerialNumber.Cmp(l.Cert.SerialNumber) == 0
}

func (f *fixture) waitServing(l *hotcerttest.Leaf) {
	f.t.Helper()
	testutil.WaitFor(f.t, "leaf "+l.Cert.SerialNumber.Text(16)+" served", func() bool { return f.serving(l) })
}

func (f *fixture) failures() int { return len(f.obs.Failures()) }

// started writes a first good pair and bundle and starts the reloader on them.
func started(t *testing.T, extra ...hotcert.Option) (*fixture, *hotcerttest.Leaf) {
	f := newFixture(t)
	a := f.leaf()
	f.writeLeaf(a)
	f.writeCA(hotcerttest.BundlePEM(f.ca))
	f.start(f.source(), extra...)
	return f, a
}

func TestKubeletSwapTwiceInARow(t *testing.T) {
	f, _ := started(t)
	for i := range 3 { // the "works once, then stops" bug shows on the second swap
		l := f.leaf()
		f.writeLeaf(l)
		f.waitServing(l)
		// The observer hears of a swap just after it is published: wait for it.
		testutil.WaitFor(t, "the reload to be observed", func() bool { return f.obs.Loads() >= i+1 })
		if got := f.obs.Loads(); got != i+1 {
			t.Fatalf("after swap %d: %d reloads", i+1, got)
		}
	}
	if f.logs.Count("TLS certificate reloaded") != 3 || f.failures() != 0 {
		t.Fatalf("reload lines %d, failures %d", f.logs.Count("TLS certificate reloaded"), f.failures())
	}
}

func TestIdenticalContentGivesNoReload(t *testing.T) {
	f, a := started(t)
	if changed, _ := f.tlsW.Write(map[string][]byte{"tls.crt": a.ChainPEM, "tls.key": a.KeyPEM}); changed {
		t.Fatal("the kubelet writer swapped identical content")
	}
	// Events that change nothing we read: an unrelated file in the watched directory.
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(f.tlsDir, "unrelated"), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.obs.Loads() != 0 || f.failures() != 0 || f.r.Current().Generation() != 1 || f.logs.Count("TLS certificate reloaded") != 0 {
		t.Fatalf("identical content reloaded: loads=%d failures=%d", f.obs.Loads(), f.failures())
	}
}

func TestTwoSwapsInQuickSuccessionServeTheLast(t *testing.T) {
	f, _ := started(t)
	b, c := f.leaf(), f.leaf()
	f.writeLeaf(b)
	f.writeLeaf(c)
	f.waitServing(c)
	if err := f.r.Reload(context.Background()); err != nil || f.failures() != 0 {
		t.Fatalf("failures %d, reload error %v", f.failures(), err)
	}
}

func TestCAInSeparateDirectory(t *testing.T) {
	f, _ := started(t)
	next := hotcerttest.MustNewCA()
	f.writeCA(hotcerttest.BundlePEM(f.ca, next))
	testutil.WaitFor(t, "union bundle", func() bool { return len(f.r.Current().TrustCertificates()) == 2 })
	f.writeCA(hotcerttest.BundlePEM(next))
	testutil.WaitFor(t, "new bundle", func() bool {
		cas := f.r.Current().TrustCertificates()
		return len(cas) == 1 && cas[0].Equal(next.Cert)
	})
}

// A bad input, applied while serving and at startup.
type badInput struct {
	name   string
	reason hotcert.Reason
	apply  func(f *fixture) // breaks the files
}

func badInputs() []badInput {
	now := time.Now()
	plain := func(f *fixture, path string) { // remove the visible symlink
		if err := os.Remove(path); err != nil {
			panic(err)
		}
	}
	// swap puts what create makes at a temporary name over path in one rename, so the
	// watcher never sees an intermediate state (a missing file) that is not the fault.
	swap := func(path string, create func(tmp string) error) {
		tmp := path + ".tmp"
		if err := create(tmp); err != nil {
			panic(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			panic(err)
		}
	}
	return []badInput{
		{"truncated certificate", hotcert.ReasonPEM, func(f *fixture) {
			l := f.leaf()
			f.writePair(hotcerttest.Truncate(l.CertPEM), l.KeyPEM)
		}},
		{"key does not match", hotcert.ReasonKeyMismatch, func(f *fixture) {
			f.writePair(f.leaf().ChainPEM, f.leaf().KeyPEM)
		}},
		{"expired", hotcert.ReasonExpired, func(f *fixture) {
			f.writeLeaf(f.leaf(hotcerttest.WithValidity(now.Add(-48*time.Hour), now.Add(-time.Hour))))
		}},
		{"not yet valid", hotcert.ReasonNotYetValid, func(f *fixture) {
			f.writeLeaf(f.leaf(hotcerttest.WithValidity(now.Add(time.Hour), now.Add(48*time.Hour))))
		}},
		{"empty bundle", hotcert.ReasonEmpty, func(f *fixture) { f.writeCA(nil) }},
		{"bundle with truncated second CA", hotcert.ReasonPEM, func(f *fixture) {
			f.writeCA(hotcerttest.Truncate(hotcerttest.BundlePEM(f.ca, hotcerttest.MustNewCA())))
		}},
		{"non-CA certificate in bundle", hotcert.ReasonNotCA, func(f *fixture) {
			f.writeCA(append(hotcerttest.BundlePEM(f.ca), f.leaf().CertPEM...))
		}},
		{"directory where a file should be", hotcert.ReasonNotRegular, func(f *fixture) {
			plain(f, f.certPath())
			if err := os.Mkdir(f.certPath(), 0o755); err != nil {
				panic(err)
			}
		}},
		{"unreadable file (symlink loop)", hotcert.ReasonRead, func(f *fixture) {
			swap(f.certPath(), func(tmp string) error { return os.Symlink(filepath.Base(f.certPath()), tmp) })
		}},
		{"oversize file", hotcert.ReasonTooLarge, func(f *fixture) {
			big := append(hotcerttest.BundlePEM(f.ca), make([]byte, hotcert.DefaultMaxInputSize)...)
			swap(f.caPath(), func(tmp string) error { return os.WriteFile(tmp, big, 0o644) })
		}},
		{"symlink to /dev/zero", hotcert.ReasonNotRegular, func(f *fixture) {
			swap(f.caPath(), func(tmp string) error { return os.Symlink("/dev/zero", tmp) })
		}},
		{"deleted file", hotcert.ReasonMissing, func(f *fixture) { plain(f, f.keyPath()) }},
	}
}

// repair puts the visible symlinks back (as the kubelet would on its next sync) and
// writes a fresh good pair and bundle.
func (f *fixture) repair() *hotcerttest.Leaf {
	f.t.Helper()
	for _, p := range []string{f.certPath(), f.keyPath(), f.caPath()} {
		if err := os.RemoveAll(p); err != nil {
			f.t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", filepath.Base(p)), p); err != nil {
			f.t.Fatal(err)
		}
	}
	l := f.leaf()
	f.writeLeaf(l)
	f.writeCA(hotcerttest.BundlePEM(f.ca, hotcerttest.MustNewCA()))
	return l
}

func TestBadInputKeepsLastGoodCountsOnceAndRecovers(t *testing.T) {
	for _, bi := range badInputs() {
		t.Run(bi.name, func(t *testing.T) {
			// Replacing a file by a directory takes two steps (a non-atomic writer): a
			// settle window that covers them even on a loaded machine.
			f, a := started(t, hotcert.WithSettle(500*time.Millisecond))
			bi.apply(f)
			testutil.WaitFor(t, "the failure to be reported", func() bool { return f.failures() == 1 })
			if !f.serving(a) {
				t.Fatal("bad input replaced the last good material")
			}
			if got := hotcert.ReasonOf(f.obs.Failures()[0]); got != bi.reason {
				t.Errorf("reason %s, want %s: %v", got, bi.reason, f.obs.Failures()[0])
			}
			// Seen again by a poll or an unrelated event: still one failure, one line.
			for range 3 {
				_ = f.r.Reload(context.Background())
			}
			if f.failures() != 1 || f.logs.Count("TLS certificate reload failed") != 1 {
				t.Fatalf("failures %d, failure lines %d; want 1 and 1\n%s", f.failures(), f.logs.Count("TLS certificate reload failed"), f.logs)
			}
			line := f.logs.String()
			if !strings.Contains(line, "component=agent_grpc") || !strings.Contains(line, f.certPath()) {
				t.Errorf("failure line lacks component or file paths:\n%s", line)
			}
			good := f.repair()
			f.waitServing(good)
			if f.r.Status().LastError != nil {
				t.Errorf("status still failing after recovery")
			}
		})
	}
}

func TestBadInputAtStartupIsAClearError(t *testing.T) {
	for _, bi := range badInputs() {
		t.Run(bi.name, func(t *testing.T) {
			f := newFixture(t)
			f.writeLeaf(f.leaf())
			f.writeCA(hotcerttest.BundlePEM(f.ca))
			bi.apply(f)
			_, err := hotcert.New(context.Background(), f.source(), f.options()...)
			if err == nil {
				t.Fatal("startup accepted bad input")
			}
			if got := hotcert.ReasonOf(err); got != bi.reason {
				t.Errorf("reason %s, want %s: %v", got, bi.reason, err)
			}
			if !strings.Contains(err.Error(), f.tlsDir) && !strings.Contains(err.Error(), f.caDir) {
				t.Errorf("error does not name the input: %v", err)
			}
			if hotcerttest.ContainsKeyMaterial(err.Error(), f.leaves...) {
				t.Errorf("error contains key material")
			}
		})
	}
}

// silent hides a source's watch, so only polling can see changes.
type silent struct{ hotcert.Source }

func (silent) Watch(ctx context.Context, _ func()) error { <-ctx.Done(); return nil }

func TestPollFallbackWithoutEvents(t *testing.T) {
	f := newFixture(t)
	f.writeLeaf(f.leaf())
	f.writeCA(hotcerttest.BundlePEM(f.ca))
	f.start(silent{f.source()}, hotcert.WithPollInterval(20*time.Millisecond))
	b := f.leaf()
	f.writeLeaf(b)
	f.waitServing(b)
}

func TestDirectoryDeletedAndRecreated(t *testing.T) {
	f, _ := started(t)
	if err := os.RemoveAll(f.tlsDir); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the missing files to be reported", func() bool { return f.failures() == 1 })
	f.tlsW = hotcerttest.MustNewAtomicWriter(f.tlsDir) // recreated, e.g. a volume remounted
	b := f.leaf()
	f.writeLeaf(b)
	f.waitServing(b) // no polling in this test: the re-watch found the new directory
	c := f.leaf()
	f.writeLeaf(c)
	f.waitServing(c) // and events flow from it again
}

func TestCertificateThenKeyWrittenApartIsOneReload(t *testing.T) {
	dir := t.TempDir()
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for p, d := range map[string][]byte{cert: a.ChainPEM, key: a.KeyPEM} {
		if err := os.WriteFile(p, d, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{t: t, obs: &testutil.Observer{}, logs: &testutil.LogBuffer{}, leaves: []*hotcerttest.Leaf{a, b}}
	src, err := file.New(file.WithKeyPair(cert, key))
	if err != nil {
		t.Fatal(err)
	}
	// The default settle window: a writer 200 ms apart must not look like a failure.
	f.start(src, hotcert.WithSettle(hotcert.DefaultSettle))
	if err := hotcerttest.WriteFileNonAtomic(cert, b.ChainPEM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the writer's gap, not a wait for the code under test
	if err := hotcerttest.WriteFileNonAtomic(key, b.KeyPEM); err != nil {
		t.Fatal(err)
	}
	f.waitServing(b)
	// Give a wrongly pending failure every chance to surface: wait out the settle window.
	time.Sleep(hotcert.DefaultSettle + 200*time.Millisecond)
	if f.obs.Loads() != 1 || f.failures() != 0 || f.logs.Count("TLS certificate reload failed") != 0 {
		t.Fatalf("reloads %d, failures %d, failure lines %d; want 1, 0, 0", f.obs.Loads(), f.failures(), f.logs.Count("TLS certificate reload failed"))
	}
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		f := newFixture(t)
		f.writeLeaf(f.leaf())
		f.writeCA(hotcerttest.BundlePEM(f.ca))
		r, err := hotcert.New(context.Background(), f.source(), f.options(hotcert.WithPollInterval(time.Millisecond))...)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- r.Start(context.Background()) }()
		f.writeLeaf(f.leaf())
		r.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestNewRejectsIncompleteConfiguration(t *testing.T) {
	for name, opts := range map[string][]file.Option{
		"nothing":       nil,
		"key only":      {file.WithKeyPair("", "/k")},
		"negative size": {file.WithCA("/ca"), file.WithMaxSize(-1)},
	} {
		if _, err := file.New(opts...); err == nil || !strings.HasPrefix(err.Error(), "file: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// What a Source reads is not a SetOption, so file.NewSet(files, file.WithCA(p))
// (or jwtfile.New(layout, file.WithCA(p))) does not compile.
func TestOnlyReadingOptionsConfigureASet(t *testing.T) {
	for name, o := range map[string]file.Option{
		"WithKeyPair":          file.WithKeyPair("/c", "/k"),
		"WithCredentialBundle": file.WithCredentialBundle("/b"),
		"WithCA":               file.WithCA("/ca"),
	} {
		if _, ok := o.(file.SetOption); ok {
			t.Errorf("%s is a SetOption: a Set would accept it and have nowhere to put it", name)
		}
	}
}
