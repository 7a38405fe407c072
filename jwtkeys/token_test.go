package jwtkeys

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRenewingTokenSource(t *testing.T) {
	f := newFixture(t, signing(newKey(t, ES256, 0)))
	fetches := 0
	fail := false
	src := NewRenewingTokenSource(TokenSourceFunc(func(ctx context.Context) (string, error) {
		fetches++
		if fail {
			return "", errors.New("issuer down")
		}
		return f.ks.Issue("agent", testTTL)
	}), WithRenewClock(f.clock.Now))
	ctx := context.Background()
	first, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(testTTL*8/10 - time.Second)
	if tok, _ := src.Token(ctx); tok != first || fetches != 1 {
		t.Fatalf("renewed before 80%% of the lifetime (%d fetches)", fetches)
	}
	f.clock.Advance(time.Second)
	fail = true
	if tok, err := src.Token(ctx); err != nil || tok != first {
		t.Fatalf("a failed renewal did not fall back on the still-valid token: %v", err)
	}
	fail = false
	second, err := src.Token(ctx)
	if err != nil || second == first || fetches != 3 {
		t.Fatalf("not renewed at 80%% (%d fetches): %v", fetches, err)
	}
	src.Invalidate()
	if third, _ := src.Token(ctx); third == second {
		t.Fatal("Invalidate kept the token")
	}
	f.clock.Advance(2 * testTTL)
	fail = true
	if _, err := src.Token(ctx); err == nil {
		t.Fatal("an expired token was returned when renewal failed")
	}
}

func TestIssuingTokenSource(t *testing.T) {
	f := newFixture(t, signing(newKey(t, EdDSA, 0)))
	src := NewIssuingTokenSource(f.ks, "agent-3", time.Minute, WithRenewClock(f.clock.Now))
	tok, err := src.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := f.mustVerify(t, tok); c.Subject != "agent-3" {
		t.Fatalf("subject %q", c.Subject)
	}
}

func TestFileTokenSource(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	src := NewFileTokenSource(p)
	ctx := context.Background()
	if _, err := src.Token(ctx); err == nil {
		t.Fatal("a missing file gave a token")
	}
	for _, tc := range []struct{ data, want string }{{"abc.def.ghi\n", "abc.def.ghi"}, {"  x.y.z  ", "x.y.z"}} {
		if err := os.WriteFile(p, []byte(tc.data), 0o600); err != nil {
			t.Fatal(err)
		}
		if tok, err := src.Token(ctx); err != nil || tok != tc.want {
			t.Fatalf("token %q %v, want %q (re-read on every call)", tok, err, tc.want)
		}
	}
	if err := os.WriteFile(p, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Token(ctx); err == nil {
		t.Fatal("an empty file gave a token")
	}
	if _, err := NewFileTokenSource(dir).Token(ctx); err == nil {
		t.Fatal("a directory gave a token")
	}
	if tok, _ := StaticToken("s").Token(ctx); tok != "s" {
		t.Fatal("StaticToken")
	}
}

func TestHeldTokenSource(t *testing.T) {
	f := newFixture(t, signing(newKey(t, ES256, 0)))
	ctx := context.Background()
	h := NewHeldTokenSource(StaticToken("bootstrap"), WithRenewClock(f.clock.Now))
	if tok, _ := h.Token(ctx); tok != "bootstrap" {
		t.Fatal("no held token: want the fallback")
	}
	pushed := f.issue(t, "agent")
	h.Set(pushed)
	if tok, _ := h.Token(ctx); tok != pushed {
		t.Fatal("the pushed token is not used")
	}
	f.clock.Advance(testTTL)
	if tok, _ := h.Token(ctx); tok != "bootstrap" {
		t.Fatal("an expired held token was used")
	}
	h.Set(pushed)
	h.Invalidate()
	if _, err := NewHeldTokenSource(nil).Token(ctx); err == nil {
		t.Fatal("no token and no fallback: want an error")
	}
}
