package mirror_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/mirror"
	"github.com/hotcert/hotcert/source/file"
)

// fixture is a kubelet-style Secret volume (tls.crt, tls.key, ca.crt), a password
// volume, a Reloader of the Secret and a Mirror of it, started.
type fixture struct {
	t       *testing.T
	ca      *hotcerttest.CA
	leaf    *hotcerttest.Leaf
	secret  *hotcerttest.AtomicWriter
	pwVol   *hotcerttest.AtomicWriter
	out     string
	logs    *testutil.LogBuffer
	obs     *testutil.Observer
	mobs    *countingObserver
	r       *hotcert.Reloader
	m       *mirror.Mirror
	stopped chan struct{}
}

func newFixture(t *testing.T, opts ...mirror.Option) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, ca: hotcerttest.MustNewCA(), logs: &testutil.LogBuffer{}, obs: &testutil.Observer{},
		mobs: &countingObserver{}, out: filepath.Join(dir, "out"), stopped: make(chan struct{})}
	f.leaf = f.ca.MustIssue()
	f.secret = hotcerttest.MustNewAtomicWriter(filepath.Join(dir, "secret"))
	f.secret.MustWrite(f.payload(f.leaf, f.ca))
	f.pwVol = hotcerttest.MustNewAtomicWriter(filepath.Join(dir, "pw"))
	f.pwVol.MustWrite(map[string][]byte{"password": []byte("s3cret-one\n")})
	log := slog.New(slog.NewTextHandler(f.logs, nil))
	src, err := file.New(file.WithKeyPair(filepath.Join(f.secret.Dir(), "tls.crt"), filepath.Join(f.secret.Dir(), "tls.key")),
		file.WithCA(filepath.Join(f.secret.Dir(), "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.r, err = hotcert.New(ctx, src, hotcert.WithLogger(log), hotcert.WithObserver(f.obs), hotcert.WithSettle(0), hotcert.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	all := append([]mirror.Option{mirror.WithPKCS12(filepath.Join(f.pwVol.Dir(), "password")), mirror.WithObserver(f.mobs),
		hotcert.WithLogger(log), hotcert.WithSettle(0), hotcert.WithPollInterval(0)}, opts...)
	f.m, err = mirror.New(ctx, f.r, f.out, all...)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.r.Start(ctx) })
	wg.Go(func() { _ = f.m.Start(ctx) })
	t.Cleanup(func() {
		cancel()
		f.m.Close()
		f.r.Close()
		wg.Wait()
	})
	return f
}

func (f *fixture) payload(l *hotcerttest.Leaf, cas ...*hotcerttest.CA) map[string][]byte {
	return map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM, "ca.crt": hotcerttest.BundlePEM(cas...)}
}

func (f *fixture) read(name string) []byte {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.out, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// keystoreLeaf decodes keystore.p12 with password and returns its leaf.
func (f *fixture) keystoreLeaf(password string) (*x509.Certificate, error) {
	_, leaf, _, err := pkcs12.DecodeChain(f.read(mirror.KeystoreFile), password)
	return leaf, err
}

// countingObserver is a mirror.Observer that records what it is told.
type countingObserver struct {
	mu       sync.Mutex
	writes   [][]string
	failures []string
}

func (o *countingObserver) ObserveWritten(_ string, files []string, _ bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writes = append(o.writes, files)
}

func (o *countingObserver) ObserveFailure(_, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures = append(o.failures, reason)
}

func (o *countingObserver) counts() (writes int, failures []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.writes), slices.Clone(o.failures)
}

// nth waits until the n-th update (the first is New's) is observed and returns
// the files it renamed. The observer hears of an update after its renames, so
// a reader that sees the new files may be there first.
func (o *countingObserver) nth(t *testing.T, n int) []string {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("update %d observed", n), func() bool { w, _ := o.counts(); return w >= n })
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writes[n-1]
}

// TestMirrorWritesEveryFormat: PEM and PKCS#12 files of the validated material,
// with the modes asked for, that decode to the input's leaf, chain, key and CAs.
func TestMirrorWritesEveryFormat(t *testing.T) {
	f := newFixture(t)
	if got := f.read(mirror.CertFile); !bytes.Equal(got, f.leaf.ChainPEM) {
		t.Errorf("tls.crt differs from the chain written")
	}
	if got := f.read(mirror.CAFile); !bytes.Equal(got, f.ca.CertPEM) {
		t.Errorf("ca.crt differs from the bundle written")
	}
	if got := f.read(mirror.KeyFile); !bytes.Equal(got, f.leaf.KeyPEM) { // both PKCS#8
		t.Errorf("tls.key differs from the key written")
	}
	key, leaf, chain, err := pkcs12.DecodeChain(f.read(mirror.KeystoreFile), "s3cret-one")
	if err != nil {
		t.Fatalf("keystore.p12: %v", err)
	}
	if !leaf.Equal(f.leaf.Cert) || len(chain) != 0 {
		t.Errorf("keystore.p12 holds leaf %s and %d more certificates, want the leaf alone", leaf.Subject, len(chain))
	}
	if k, ok := key.(crypto.Signer); !ok || !k.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(f.leaf.Key.Public()) {
		t.Errorf("keystore.p12's key is not the leaf's")
	}
	cas, err := pkcs12.DecodeTrustStore(f.read(mirror.TruststoreFile), "s3cret-one")
	if err != nil {
		t.Fatalf("truststore.p12: %v", err)
	}
	if len(cas) != 1 || !cas[0].Equal(f.ca.Cert) {
		t.Errorf("truststore.p12 holds %d certificates, want the CA", len(cas))
	}
	for name, want := range map[string]os.FileMode{"tls.crt": 0o644, "ca.crt": 0o644, "truststore.p12": 0o644, "tls.key": 0o600, "keystore.p12": 0o600} {
		fi, err := os.Lstat(filepath.Join(f.out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want a regular file of mode %v", name, fi.Mode(), want)
		}
	}
	if hotcerttest.ContainsKeyMaterial(f.logs.String(), f.leaf) || strings.Contains(f.logs.String(), "s3cret") {
		t.Errorf("the logs hold key material or the password:\n%s", f.logs)
	}
	if n := f.logs.Count("TLS material mirrored"); n != 1 {
		t.Errorf("%d lines say the material was mirrored, want 1:\n%s", n, f.logs)
	}
}

// TestMirrorFollowsRenewalsWithRenamesInPlace: each renewal the kubelet swaps in
// reaches the directory as a new inode under the same name (a rename in place,
// no symlink), and a renewal that keeps the CA rewrites neither ca.crt nor
// truststore.p12.
func TestMirrorFollowsRenewalsWithRenamesInPlace(t *testing.T) {
	f := newFixture(t)
	inode := func(name string) uint64 {
		fi, err := os.Lstat(filepath.Join(f.out, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			t.Fatalf("%s is a symlink", name)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	before := map[string]uint64{}
	for _, n := range []string{"tls.crt", "tls.key", "ca.crt", "keystore.p12", "truststore.p12"} {
		before[n] = inode(n)
	}
	next := f.ca.MustIssue()
	f.secret.MustWrite(f.payload(next, f.ca))
	testutil.WaitFor(t, "the renewal in the mirror", func() bool { return bytes.Equal(f.read(mirror.CertFile), next.ChainPEM) })
	testutil.WaitFor(t, "the renewal in the keystore", func() bool {
		l, err := f.keystoreLeaf("s3cret-one")
		return err == nil && l.Equal(next.Cert)
	})
	if !bytes.Equal(f.read(mirror.KeyFile), next.KeyPEM) {
		t.Errorf("tls.key is not the renewal's key")
	}
	for _, n := range []string{"tls.crt", "tls.key", "keystore.p12"} {
		if inode(n) == before[n] {
			t.Errorf("%s kept its inode: not renamed in place", n)
		}
	}
	for _, n := range []string{"ca.crt", "truststore.p12"} {
		if inode(n) != before[n] {
			t.Errorf("%s was rewritten though the CA bundle did not change", n)
		}
	}
	if got, want := f.mobs.nth(t, 2), []string{"tls.key", "tls.crt", "keystore.p12"}; !slices.Equal(got, want) {
		t.Errorf("renamed %v, want %v (the key before the certificate)", got, want)
	}
	ents, _ := os.ReadDir(f.out)
	for _, e := range ents {
		if strings.Contains(e.Name(), "tmp") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}
}

// TestBadInputNeverReachesTheMirror: a key that does not match, swapped in by the
// kubelet, is refused by the Reloader (one line, one count) and no file of the
// directory changes; the next good write is mirrored.
func TestBadInputNeverReachesTheMirror(t *testing.T) {
	f := newFixture(t)
	snapshot := map[string][]byte{}
	for _, n := range []string{"tls.crt", "tls.key", "ca.crt", "keystore.p12", "truststore.p12"} {
		snapshot[n] = f.read(n)
	}
	other := f.ca.MustIssue()
	bad := f.payload(f.ca.MustIssue(), f.ca)
	bad["tls.key"] = other.KeyPEM
	f.secret.MustWrite(bad)
	testutil.WaitFor(t, "the refusal", func() bool { return len(f.obs.Failures()) == 1 })
	// One more good write proves the mirror had its chance to write the bad one.
	good := f.ca.MustIssue()
	if got := f.logs.Count("TLS certificate reload failed"); got != 1 {
		t.Errorf("%d refusal lines, want 1", got)
	}
	for n, b := range snapshot {
		if !bytes.Equal(f.read(n), b) {
			t.Errorf("%s changed after a refused write", n)
		}
	}
	if w, fails := f.mobs.counts(); w != 1 || len(fails) != 0 {
		t.Errorf("mirror writes %d, failures %v after a refused input; want the first write only", w, fails)
	}
	f.secret.MustWrite(f.payload(good, f.ca))
	testutil.WaitFor(t, "the good write in the mirror", func() bool { return bytes.Equal(f.read(mirror.CertFile), good.ChainPEM) })
}

// TestPasswordFileFollowed: a new password rewrites both PKCS#12 files (and no
// PEM file); an empty password file is refused once (one line, one count) and
// the files keep the last good password; the next good password is used.
func TestPasswordFileFollowed(t *testing.T) {
	f := newFixture(t)
	pem := f.read(mirror.CertFile)
	f.pwVol.MustWrite(map[string][]byte{"password": []byte("s3cret-two\r\n")})
	testutil.WaitFor(t, "the new password", func() bool { _, err := f.keystoreLeaf("s3cret-two"); return err == nil })
	if _, err := pkcs12.DecodeTrustStore(f.read(mirror.TruststoreFile), "s3cret-two"); err != nil {
		t.Errorf("truststore.p12 under the new password: %v", err)
	}
	if got, want := f.mobs.nth(t, 2), []string{"truststore.p12", "keystore.p12"}; !slices.Equal(got, want) {
		t.Errorf("a new password renamed %v, want %v", got, want)
	}
	if !bytes.Equal(f.read(mirror.CertFile), pem) {
		t.Errorf("tls.crt changed with the password")
	}

	ks := f.read(mirror.KeystoreFile)
	f.pwVol.MustWrite(map[string][]byte{"password": []byte("\n")})
	testutil.WaitFor(t, "the refused password", func() bool { _, fails := f.mobs.counts(); return len(fails) == 1 })
	if _, fails := f.mobs.counts(); fails[0] != mirror.ReasonPassword {
		t.Errorf("failure reason %q, want %q", fails[0], mirror.ReasonPassword)
	}
	if n := f.logs.Count("TLS mirror update failed"); n != 1 {
		t.Errorf("%d failure lines, want 1:\n%s", n, f.logs)
	}
	if st := f.m.Status(); st.LastReason != mirror.ReasonPassword || !st.InSync {
		t.Errorf("status after a refused password: reason %q, in sync %v; want password, true", st.LastReason, st.InSync)
	}
	// A renewal meanwhile is mirrored with the last good password.
	next := f.ca.MustIssue()
	f.secret.MustWrite(f.payload(next, f.ca))
	testutil.WaitFor(t, "the renewal", func() bool { l, err := f.keystoreLeaf("s3cret-two"); return err == nil && l.Equal(next.Cert) })
	if bytes.Equal(f.read(mirror.KeystoreFile), ks) {
		t.Errorf("keystore.p12 was not rewritten by the renewal")
	}
	if st := f.m.Status(); st.LastReason != mirror.ReasonPassword {
		t.Errorf("a renewal cleared the refused password from the status: %+v", st)
	}
	f.pwVol.MustWrite(map[string][]byte{"password": []byte("s3cret-three")})
	testutil.WaitFor(t, "the third password", func() bool { _, err := f.keystoreLeaf("s3cret-three"); return err == nil })
	if n := f.logs.Count("TLS mirror update failed"); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
	if strings.Contains(f.logs.String(), "s3cret") {
		t.Errorf("the logs hold a password:\n%s", f.logs)
	}
}

// TestWriteFailureKeepsFilesAndIsRetried: a file that cannot be replaced (a
// directory in its place) fails the update once — one line, one count, however
// often it is retried — and leaves every other file as it was; once the way is
// clear the retry writes it.
func TestWriteFailureKeepsFilesAndIsRetried(t *testing.T) {
	f := newFixture(t, mirror.WithRetry(5e6)) // 5ms
	ks := f.read(mirror.KeystoreFile)
	blocker := filepath.Join(f.out, mirror.CertFile)
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	next := f.ca.MustIssue()
	f.secret.MustWrite(f.payload(next, f.ca))
	testutil.WaitFor(t, "the write failure", func() bool { _, fails := f.mobs.counts(); return len(fails) == 1 })
	if st := f.m.Status(); st.InSync || st.LastReason != mirror.ReasonWrite || !strings.Contains(st.LastError.Error(), "renaming into tls.crt: ") {
		t.Errorf("status after a failed write: in sync %v, reason %q, error %v", st.InSync, st.LastReason, st.LastError)
	}
	tries := mirror.Tries(f.m)
	testutil.WaitFor(t, "three retries", func() bool { return mirror.Tries(f.m) >= tries+3 })
	if !bytes.Equal(f.read(mirror.KeystoreFile), ks) {
		t.Errorf("keystore.p12 changed in an update that failed")
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the retried write", func() bool {
		b, err := os.ReadFile(blocker)
		return err == nil && bytes.Equal(b, next.ChainPEM)
	})
	if _, fails := f.mobs.counts(); len(fails) != 1 {
		t.Errorf("failures %v, want one", fails)
	}
	if n := f.logs.Count("TLS mirror update failed"); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
	if st := f.m.Status(); !st.InSync || st.LastError != nil {
		t.Errorf("status after the retry: %+v", st)
	}
}

// TestNewRefusesAMissingPassword: no password file is a startup error, and
// nothing is written.
func TestNewRefusesAMissingPassword(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	l := ca.MustIssue()
	dir := t.TempDir()
	w := hotcerttest.MustNewAtomicWriter(filepath.Join(dir, "secret"))
	w.MustWrite(map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM})
	src, err := file.New(file.WithKeyPair(filepath.Join(w.Dir(), "tls.crt"), filepath.Join(w.Dir(), "tls.key")))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hotcert.New(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	_, err = mirror.New(context.Background(), r, out, mirror.WithPKCS12(filepath.Join(dir, "nope")))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "nope")) {
		t.Fatalf("New with a missing password file: %v, want an error naming it", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("files written without a password: %v", ents)
	}
}

// TestNewRemovesStaleTemporaryFiles: a temporary file a stopped mirror left is
// removed; other files are not.
func TestNewRemovesStaleTemporaryFiles(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	dir := t.TempDir()
	w := hotcerttest.MustNewAtomicWriter(filepath.Join(dir, "ca"))
	w.MustWrite(map[string][]byte{"ca.crt": ca.CertPEM})
	src, err := file.New(file.WithCA(filepath.Join(w.Dir(), "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hotcert.New(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	stale, mine := filepath.Join(out, ".tls.key.hotcert-tmp-123"), filepath.Join(out, "app.yaml")
	for _, p := range []string{stale, mine} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := mirror.New(context.Background(), r, out)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file kept: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("another file was removed: %v", err)
	}
	if got := m.Status().Files; !slices.Equal(got, []string{"ca.crt"}) {
		t.Errorf("a trust-only source mirrored %v, want ca.crt alone", got)
	}
}
