package jwtkeys

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// observer records a KeySet's observations: testutil.Observer counts the loads
// and failures (its ObserveFailure is jwtkeys.Observer's too), this one the rest.
type observer struct {
	testutil.Observer
	mu     sync.Mutex
	keys   int
	verify map[RejectReason]int
}

func (o *observer) ObserveLoad(component string, _ SetInfo, initial bool) {
	o.Observer.ObserveLoad(component, nil, initial) // it counts, never reads the material
}

func (o *observer) ObserveKeys(string, SetInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keys++
}

func (o *observer) ObserveVerify(_ string, r RejectReason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verify == nil {
		o.verify = map[RejectReason]int{}
	}
	o.verify[r]++
}

func (o *observer) counts() (loads, failures, keys int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.Loads(), len(o.Failures()), o.keys
}

// fixture is a KeySet over a MemorySource with a fake clock, logs and an observer.
type fixture struct {
	ks    *KeySet
	src   *MemorySource
	clock *hotcerttest.FakeClock
	obs   *observer
	logs  *testutil.LogBuffer
}

const (
	testTTL   = 10 * time.Minute
	testSkew  = 30 * time.Second
	testGrace = 15 * time.Minute
)

func newFixture(t *testing.T, c Content, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{src: NewMemorySource(c), clock: hotcerttest.NewFakeClock(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)), obs: &observer{}, logs: &testutil.LogBuffer{}}
	all := append([]Option{
		WithClock(f.clock.Now), WithMaxTokenTTL(testTTL), WithClockSkew(testSkew), WithGracePeriod(testGrace),
		WithObserver(f.obs), hotcert.WithLogger(slog.New(slog.NewTextHandler(f.logs, nil))), hotcert.WithSettle(0), hotcert.WithPollInterval(0),
	}, opts...)
	ks, err := New(context.Background(), f.src, all...)
	if err != nil {
		t.Fatal(err)
	}
	f.ks = ks
	t.Cleanup(func() { ks.Close() })
	return f
}

// set replaces the source's content and reloads; it fails the test on a rejection.
func (f *fixture) set(t *testing.T, c Content) {
	t.Helper()
	f.src.Set(c)
	if err := f.ks.Reload(context.Background()); err != nil {
		t.Fatalf("reload: %v", err)
	}
}

func (f *fixture) issue(t *testing.T, sub string) string {
	t.Helper()
	tok, err := f.ks.Issue(sub, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *fixture) mustVerify(t *testing.T, tok string) *jwt.RegisteredClaims {
	t.Helper()
	c, err := f.ks.Verify(tok)
	if err != nil {
		t.Fatalf("token rejected: %v", err)
	}
	return c
}

func (f *fixture) mustReject(t *testing.T, tok string, want RejectReason) {
	t.Helper()
	_, err := f.ks.Verify(tok)
	if err == nil {
		t.Fatalf("token accepted, want rejection %q", want)
	}
	if got := RejectReasonOf(err); got != want {
		t.Fatalf("rejected with %q (%v), want %q", got, err, want)
	}
}

// testKey is a generated signing key with its public half.
type testKey struct {
	alg     string
	private []byte // PEM
	public  []byte // PEM
	kid     string
	signer  any // parsed private key, for signing tokens by hand
}

var (
	keyCacheMu sync.Mutex
	keyCache   = map[string][]*testKey{}
)

// newKey returns the n-th test key of alg (cached: RSA generation is slow).
func newKey(t testing.TB, alg string, n int) *testKey {
	t.Helper()
	keyCacheMu.Lock()
	defer keyCacheMu.Unlock()
	for len(keyCache[alg]) <= n {
		priv, err := GenerateSigningKey(alg)
		if err != nil {
			t.Fatal(err)
		}
		pub, kid, err := PublicKeyPEM(priv)
		if err != nil {
			t.Fatal(err)
		}
		k, err := parseSigningKey(hotcert.Input{Name: "k", Data: priv})
		if err != nil {
			t.Fatal(err)
		}
		keyCache[alg] = append(keyCache[alg], &testKey{alg: alg, private: priv, public: pub, kid: kid, signer: k.sign})
	}
	return keyCache[alg][n]
}

func signing(k *testKey, verify ...*testKey) Content {
	c := Content{SigningKey: hotcert.Input{Name: "signing.key", Data: k.private}}
	if len(verify) > 0 {
		var pems []byte
		for _, v := range verify {
			pems = append(pems, v.public...)
		}
		c.VerificationKeys = hotcert.Input{Name: "verify.pem", Data: pems}
	}
	return c
}

func secrets(lines ...string) Content {
	var b []byte
	for _, l := range lines {
		b = append(b, l...)
		b = append(b, '\n')
	}
	return Content{HMACSecrets: hotcert.Input{Name: "hs256.keys", Data: b}}
}

// handSigned signs claims with k directly (bypassing the KeySet's lifetime cap), with
// the given alg and kid headers.
func handSigned(t *testing.T, method jwt.SigningMethod, kid string, signKey any, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(signKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claimsAt(now time.Time, ttl time.Duration) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{
		Subject:   "agent-1",
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// leaks reports whether s holds a PEM header or a 16-character fragment of the base64
// body of any of the PEM private keys or base64 secrets given.
func leaks(s string, secrets ...[]byte) bool {
	if strings.Contains(s, "-----BEGIN") {
		return true
	}
	for _, sec := range secrets {
		for line := range strings.SplitSeq(string(sec), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(s, line[:16]) {
				return true
			}
		}
	}
	return false
}
