package jwtkeys

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/testutil"
)

// start runs ks.Start until the test ends.
func start(t *testing.T, ks *KeySet) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- ks.Start(context.Background()) }()
	t.Cleanup(func() {
		ks.Close()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

// TestFollowsSourceAndExpires: a started KeySet follows its source's notifications,
// and at the end of a grace period drops the retired key once: one log line, one
// observation, a smaller JWKS.
func TestFollowsSourceAndExpires(t *testing.T) {
	a, b := newKey(t, ES256, 0), newKey(t, ES256, 1)
	logs, obs := &testutil.LogBuffer{}, &observer{}
	src := NewMemorySource(signing(a))
	ks, err := New(context.Background(), src,
		WithMaxTokenTTL(100*time.Millisecond), WithClockSkew(0), WithGracePeriod(time.Second),
		hotcert.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithObserver(obs), hotcert.WithSettle(0), hotcert.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	start(t, ks)
	tok, err := ks.Issue("x", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	src.Set(signing(b))
	testutil.WaitFor(t, "rotation", func() bool { return ks.SigningKeyID() == b.kid })
	testutil.WaitFor(t, "rotation line", func() bool { return logs.Count("JWT signing key rotated") == 1 })
	if _, err := ks.Verify(tok); err != nil && RejectReasonOf(err) != ReasonExpired {
		t.Fatalf("in-flight token rejected right after the rotation: %v", err)
	}
	if len(ks.Info().Keys) != 2 {
		t.Fatalf("keys %+v", ks.Info().Keys)
	}
	testutil.WaitFor(t, "grace period end", func() bool { return logs.Count("JWT retired key left its grace period") == 1 })
	if k := ks.Info().Keys; len(k) != 1 || k[0].ID != b.kid {
		t.Fatalf("keys after grace %+v", k)
	}
	testutil.WaitFor(t, "key observation", func() bool { _, _, keys := obs.counts(); return keys == 1 })
	// The expiry loop pruned the key: its token is refused as retired, not unknown.
	if _, err := ks.Verify(tok); RejectReasonOf(err) != ReasonKeyRetired {
		t.Fatalf("token of the pruned key: %v, want %s", err, ReasonKeyRetired)
	}
	src.Set(signing(b)) // same content: nothing happens
	time.Sleep(20 * time.Millisecond)
	if loads, _, _ := obs.counts(); loads != 1 || logs.Count("JWT signing key rotated") != 1 {
		t.Fatalf("%d loads; logs:\n%s", loads, logs)
	}
	if logs.Count("JWT retired key left its grace period") != 1 {
		t.Fatal("the expiry was logged more than once")
	}
}

// TestNoTokenRejectedDuringRotations: while the signing key rotates again and again,
// concurrent clients issue and verify tokens; every token issued is accepted until it
// expires (run with -race).
func TestNoTokenRejectedDuringRotations(t *testing.T) {
	keys := []*testKey{newKey(t, ES256, 0), newKey(t, EdDSA, 0), newKey(t, ES256, 1), newKey(t, EdDSA, 1)}
	src := NewMemorySource(signing(keys[0]))
	ks, err := New(context.Background(), src, WithMaxTokenTTL(time.Minute), WithClockSkew(time.Second), hotcert.WithSettle(0), hotcert.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	start(t, ks)
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		verified atomic.Int64
	)
	for range 4 {
		wg.Go(func() {
			var held []string
			for !stop.Load() {
				tok, err := ks.Issue("agent", time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				held = append(held, tok)
				for _, h := range held[max(0, len(held)-8):] {
					if _, err := ks.Verify(h); err != nil {
						t.Errorf("token in flight rejected during rotations: %v", err)
						return
					}
					verified.Add(1)
				}
			}
		})
	}
	for i := 1; i <= 20; i++ {
		src.Set(signing(keys[i%len(keys)]))
		want := keys[i%len(keys)].kid
		testutil.WaitFor(t, "rotation", func() bool { return ks.SigningKeyID() == want })
		_ = ks.JWKS()
	}
	stop.Store(true)
	wg.Wait()
	if verified.Load() == 0 {
		t.Fatal("nothing verified")
	}
}

// TestLogsHoldNoKeyMaterial: loads, rotations, failures and expiries log kids and
// reasons, never keys or secrets.
func TestLogsHoldNoKeyMaterial(t *testing.T) {
	a, b := newKey(t, RS256, 0), newKey(t, EdDSA, 0)
	s1, _ := GenerateHMACSecret()
	f := newFixture(t, signing(a))
	f.set(t, signing(b, a))
	bad := signing(b)
	bad.VerificationKeys.Name, bad.VerificationKeys.Data = "verify.pem", a.private // a private key where public keys belong
	f.src.Set(bad)
	_ = f.ks.Reload(context.Background())
	f.set(t, secrets(s1))
	f.src.Set(secrets(s1[:20]))
	_ = f.ks.Reload(context.Background())
	out := f.logs.String()
	for _, msg := range []string{"JWT signing keys loaded", "JWT signing key rotated", "JWT signing key reload failed"} {
		if f.logs.Count(msg) == 0 {
			t.Fatalf("no %q line:\n%s", msg, out)
		}
	}
	if leaks(out, a.private, b.private, []byte(s1)) {
		t.Fatalf("logs leak key material:\n%s", out)
	}
}
