package jwtfile_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtfile"
	"github.com/hotcert/hotcert/source/file"
)

type key struct{ private, public []byte }

func newKey(t *testing.T, alg string) key {
	t.Helper()
	priv, err := jwtkeys.GenerateSigningKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := jwtkeys.PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	return key{priv, pub}
}

func kid(t *testing.T, k key) string {
	t.Helper()
	_, id, err := jwtkeys.PublicKeyPEM(k.private)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// fixture is a KeySet over a kubelet-style key directory.
type fixture struct {
	dir  string
	w    *hotcerttest.AtomicWriter
	ks   *jwtkeys.KeySet
	logs *testutil.LogBuffer
	keys [][]byte
}

func newFixture(t *testing.T, payload map[string][]byte) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	f := &fixture{dir: dir, w: hotcerttest.MustNewAtomicWriter(dir), logs: &testutil.LogBuffer{}}
	f.w.MustWrite(payload)
	return f
}

func (f *fixture) start(t *testing.T, src jwtkeys.Source, opts ...jwtkeys.Option) {
	t.Helper()
	ks, err := jwtkeys.New(context.Background(), src, append([]jwtkeys.Option{
		hotcert.WithLogger(slog.New(slog.NewTextHandler(f.logs, nil))),
		hotcert.WithSettle(50 * time.Millisecond), hotcert.WithPollInterval(0),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.ks = ks
	done := make(chan error, 1)
	go func() { done <- ks.Start(context.Background()) }()
	t.Cleanup(func() {
		ks.Close()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
		for _, k := range f.keys {
			if mid := len(k) / 2; strings.Contains(f.logs.String(), string(k[mid-8:mid+8])) {
				t.Errorf("logs contain key material:\n%s", f.logs)
			}
		}
	})
}

func (f *fixture) source(t *testing.T) *jwtfile.Source {
	t.Helper()
	s, err := jwtfile.New(jwtfile.Dir(f.dir), file.WithRewatchInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKubeletRotation: a Secret volume update that replaces signing.key rotates the
// key set; tokens signed before keep verifying; one log line per change.
func TestKubeletRotation(t *testing.T) {
	a, b, c := newKey(t, jwtkeys.ES256), newKey(t, jwtkeys.EdDSA), newKey(t, jwtkeys.ES256)
	f := newFixture(t, map[string][]byte{"signing.key": a.private})
	f.keys = [][]byte{a.private, b.private, c.private}
	f.start(t, f.source(t))
	if f.ks.SigningKeyID() != kid(t, a) {
		t.Fatal("initial key")
	}
	byA, err := f.ks.Issue("agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// Step 1: publish the next key. Step 2: sign with it.
	f.w.MustWrite(map[string][]byte{"signing.key": a.private, "verify.pem": b.public})
	testutil.WaitFor(t, "next key published", func() bool { return strings.Contains(string(f.ks.JWKS()), kid(t, b)) })
	f.w.MustWrite(map[string][]byte{"signing.key": b.private})
	testutil.WaitFor(t, "rotation", func() bool { return f.ks.SigningKeyID() == kid(t, b) })
	if _, err := f.ks.Verify(byA); err != nil {
		t.Fatalf("token signed before the rotation rejected: %v", err)
	}
	// The new key is in use before its log line is written: wait for the line.
	testutil.WaitFor(t, "rotation line", func() bool { return f.logs.Count("JWT signing key rotated") == 1 })
	if f.logs.Count("JWT verification keys reloaded") != 1 {
		t.Fatalf("logs:\n%s", f.logs)
	}
	// An identical write makes no swap and no log line; a second rotation works too
	// (a watch on the file itself would have died after the first swap).
	f.w.MustWrite(map[string][]byte{"signing.key": b.private})
	f.w.MustWrite(map[string][]byte{"signing.key": c.private})
	testutil.WaitFor(t, "second rotation", func() bool { return f.ks.SigningKeyID() == kid(t, c) })
	if _, err := f.ks.Verify(byA); err != nil {
		t.Fatalf("token rejected after the second rotation: %v", err)
	}
	testutil.WaitFor(t, "second rotation line", func() bool { return f.logs.Count("JWT signing key rotated") == 2 })
}

// TestBadKeyFileKeepsLastGood: a broken signing.key is reported once and the last good
// keys keep signing and verifying; the fixed file is picked up.
func TestBadKeyFileKeepsLastGood(t *testing.T) {
	a, b := newKey(t, jwtkeys.RS256), newKey(t, jwtkeys.ES256)
	f := newFixture(t, map[string][]byte{"signing.key": a.private})
	f.keys = [][]byte{a.private, b.private}
	f.start(t, f.source(t))
	tok, _ := f.ks.Issue("agent", time.Minute)

	f.w.MustWrite(map[string][]byte{"signing.key": hotcerttest.Truncate(b.private)})
	testutil.WaitFor(t, "failure report", func() bool { return f.logs.Count("JWT signing key reload failed") == 1 })
	if f.ks.SigningKeyID() != kid(t, a) {
		t.Fatal("a broken file replaced the key")
	}
	if _, err := f.ks.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ks.Issue("agent", time.Minute); err != nil {
		t.Fatal(err)
	}
	if st := f.ks.Status(); st.Failures != 1 || !strings.Contains(st.LastError.Error(), filepath.Join(f.dir, "signing.key")) {
		t.Fatalf("status %+v: want one failure naming the file", st)
	}
	f.w.MustWrite(map[string][]byte{"signing.key": b.private})
	testutil.WaitFor(t, "recovery", func() bool { return f.ks.SigningKeyID() == kid(t, b) })
	if f.logs.Count("JWT signing key reload failed") != 1 {
		t.Fatal("the failure was reported more than once")
	}
}

// TestNonAtomicWriterSettles: a writer that truncates and rewrites the file in place
// is given the settle window: the half-written file is never reported.
func TestNonAtomicWriterSettles(t *testing.T) {
	a, b := newKey(t, jwtkeys.ES256), newKey(t, jwtkeys.ES256)
	dir := t.TempDir()
	p := filepath.Join(dir, "signing.key")
	if err := os.WriteFile(p, a.private, 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, logs: &testutil.LogBuffer{}, keys: [][]byte{a.private, b.private}}
	f.start(t, f.source(t), hotcert.WithSettle(time.Second))
	if err := hotcerttest.WriteFileNonAtomic(p, b.private); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "rotation", func() bool { return f.ks.SigningKeyID() == kid(t, b) })
	if f.logs.Count("JWT signing key reload failed") != 0 {
		t.Fatalf("a half-written file was reported:\n%s", f.logs)
	}
}

// TestVerifyFileOptional: verify.pem may be missing; when it appears its keys verify,
// when it goes away they are rejected at once.
func TestVerifyFileOptional(t *testing.T) {
	a, b := newKey(t, jwtkeys.ES256), newKey(t, jwtkeys.ES256)
	f := newFixture(t, map[string][]byte{"signing.key": a.private})
	f.start(t, f.source(t))
	bSigner, _ := jwt.ParseECPrivateKeyFromPEM(b.private)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Minute))})
	tok.Header["kid"] = kid(t, b)
	byB, _ := tok.SignedString(bSigner)
	if _, err := f.ks.Verify(byB); jwtkeys.RejectReasonOf(err) != jwtkeys.ReasonUnknownKey {
		t.Fatalf("unlisted key: %v", err)
	}
	f.w.MustWrite(map[string][]byte{"signing.key": a.private, "verify.pem": b.public})
	testutil.WaitFor(t, "listed", func() bool { _, err := f.ks.Verify(byB); return err == nil })
	f.w.MustWrite(map[string][]byte{"signing.key": a.private})
	testutil.WaitFor(t, "removed", func() bool {
		_, err := f.ks.Verify(byB)
		return jwtkeys.RejectReasonOf(err) == jwtkeys.ReasonUnknownKey
	})
}

// TestHMACFile: an hs256.keys file in its own directory, with verify.pem in another.
func TestHMACFile(t *testing.T) {
	s1, _ := jwtkeys.GenerateHMACSecret()
	s2, _ := jwtkeys.GenerateHMACSecret()
	ec := newKey(t, jwtkeys.ES256)
	f := newFixture(t, map[string][]byte{"hs256.keys": []byte(s1 + "\n")})
	pubDir := filepath.Join(t.TempDir(), "pub")
	pubW := hotcerttest.MustNewAtomicWriter(pubDir)
	pubW.MustWrite(map[string][]byte{"verify.pem": ec.public})
	src, err := jwtfile.New(jwtfile.Layout{HMACSecrets: filepath.Join(f.dir, "hs256.keys"), VerificationKeys: filepath.Join(pubDir, "verify.pem")},
		file.WithRewatchInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f.keys = [][]byte{[]byte(s1), []byte(s2)}
	f.start(t, src)
	if f.ks.Info().Algorithm != jwtkeys.HS256 || len(f.ks.Info().Keys) != 2 {
		t.Fatalf("info %+v", f.ks.Info())
	}
	tok, _ := f.ks.Issue("a", time.Minute)
	f.w.MustWrite(map[string][]byte{"hs256.keys": []byte(s2 + "\n" + s1 + "\n")})
	id2, _ := jwtkeys.HMACKeyID(s2)
	testutil.WaitFor(t, "rotation", func() bool { return f.ks.SigningKeyID() == id2 })
	if _, err := f.ks.Verify(tok); err != nil {
		t.Fatal(err)
	}
	pubW.MustWrite(map[string][]byte{"verify.pem": []byte("\n")}) // the second directory is watched too
	testutil.WaitFor(t, "verify.pem emptied", func() bool { return len(f.ks.Info().Keys) == 2 && !strings.Contains(string(f.ks.JWKS()), kid(t, ec)) })
}

func TestReadErrors(t *testing.T) {
	a := newKey(t, jwtkeys.ES256)
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(l jwtfile.Layout, opts ...file.SetOption) error {
		s, err := jwtfile.New(l, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Read(context.Background())
		return err
	}
	if r := hotcert.ReasonOf(read(jwtfile.Dir(dir))); r != hotcert.ReasonMissing {
		t.Fatalf("missing signing.key: %s", r)
	}
	write("signing.key", a.private)
	if err := read(jwtfile.Dir(dir)); err != nil {
		t.Fatalf("verify.pem is optional: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "verify.pem"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := hotcert.ReasonOf(read(jwtfile.Dir(dir))); r != hotcert.ReasonNotRegular {
		t.Fatalf("directory as verify.pem: %s", r)
	}
	if r := hotcert.ReasonOf(read(jwtfile.Layout{SigningKey: "/dev/zero"})); r != hotcert.ReasonNotRegular {
		t.Fatalf("/dev/zero: %s", r)
	}
	if r := hotcert.ReasonOf(read(jwtfile.Layout{SigningKey: filepath.Join(dir, "signing.key")}, file.WithMaxSize(100))); r != hotcert.ReasonTooLarge {
		t.Fatalf("size cap: %s", r)
	}
	both := jwtfile.Dir(dir)
	both.HMACSecrets = filepath.Join(dir, "x")
	for name, c := range map[string]struct {
		l    jwtfile.Layout
		opts []file.SetOption
	}{
		"nothing":       {},
		"key and HMAC":  {l: both},
		"size cap of 0": {l: jwtfile.Dir(dir), opts: []file.SetOption{file.WithMaxSize(0)}},
	} {
		if _, err := jwtfile.New(c.l, c.opts...); err == nil || !strings.HasPrefix(err.Error(), "jwtfile: ") {
			t.Errorf("%s: New returned %v", name, err)
		}
	}
	s, _ := jwtfile.New(jwtfile.Dir("/keys"))
	if s.String() != "files signing=/keys/signing.key verify=/keys/verify.pem" {
		t.Fatalf("String() = %q", s.String())
	}
	if _, err := jwtkeys.New(context.Background(), mustSource(t, jwtfile.Dir(t.TempDir()))); err == nil {
		t.Fatal("a KeySet started from an empty directory")
	}
}

func mustSource(t *testing.T, l jwtfile.Layout) *jwtfile.Source {
	t.Helper()
	s, err := jwtfile.New(l)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
