package jwtmetrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtmetrics"
	"github.com/hotcert/hotcert/metrics"
)

func content(t *testing.T, alg string) jwtkeys.Content {
	t.Helper()
	priv, err := jwtkeys.GenerateSigningKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	return jwtkeys.Content{SigningKey: hotcert.Input{Name: "signing.key", Data: priv}}
}

// TestCountsOncePerChange drives a real KeySet: counters move once per distinct
// change or distinct bad content, the signing-key series follows rotations.
func TestCountsOncePerChange(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec, err := jwtmetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := content(t, jwtkeys.ES256), content(t, jwtkeys.EdDSA)
	src := jwtkeys.NewMemorySource(a)
	ks, err := jwtkeys.New(context.Background(), src, jwtkeys.WithObserver(rec), hotcert.WithComponent("agent_tokens"), hotcert.WithSettle(0))
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	tok, _ := ks.Issue("x", time.Minute)
	for range 3 {
		_ = ks.Reload(context.Background()) // same content: nothing
	}
	src.Set(b)
	_ = ks.Reload(context.Background())
	kidB := ks.SigningKeyID()
	bad := b
	bad.SigningKey.Data = []byte("garbage")
	src.Set(bad)
	for range 3 {
		_ = ks.Reload(context.Background()) // the same bad content: counted once
	}
	_, _ = ks.Verify(tok)
	_, _ = ks.Verify(tok)
	_, _ = ks.Verify("garbage")

	want := `
# HELP hotcert_jwt_key_reload_total JWT key set reloads by result: one per distinct content change or distinct bad content.
# TYPE hotcert_jwt_key_reload_total counter
hotcert_jwt_key_reload_total{component="agent_tokens",result="failure"} 1
hotcert_jwt_key_reload_total{component="agent_tokens",result="success"} 1
# HELP hotcert_jwt_reload_failures_total JWT key content that failed to load while the last good keys kept serving. Alert on any increase.
# TYPE hotcert_jwt_reload_failures_total counter
hotcert_jwt_reload_failures_total{component="agent_tokens"} 1
# HELP hotcert_jwt_signing_key_info The key that signs new tokens (value 1), by kid and alg.
# TYPE hotcert_jwt_signing_key_info gauge
hotcert_jwt_signing_key_info{alg="EdDSA",component="agent_tokens",kid="` + kidB + `"} 1
# HELP hotcert_jwt_verification_keys Keys that verify tokens: the signing key, listed keys, and retired keys inside their grace period.
# TYPE hotcert_jwt_verification_keys gauge
hotcert_jwt_verification_keys{component="agent_tokens"} 2
# HELP hotcert_jwt_verifications_total Tokens verified, by result: ok or the reason they were rejected.
# TYPE hotcert_jwt_verifications_total counter
hotcert_jwt_verifications_total{component="agent_tokens",result="algorithm"} 0
hotcert_jwt_verifications_total{component="agent_tokens",result="claims"} 0
hotcert_jwt_verifications_total{component="agent_tokens",result="expired"} 0
hotcert_jwt_verifications_total{component="agent_tokens",result="key_retired"} 0
hotcert_jwt_verifications_total{component="agent_tokens",result="malformed"} 1
hotcert_jwt_verifications_total{component="agent_tokens",result="not_yet_valid"} 0
hotcert_jwt_verifications_total{component="agent_tokens",result="ok"} 2
hotcert_jwt_verifications_total{component="agent_tokens",result="signature"} 0
hotcert_jwt_verifications_total{component="agent_tokens",result="unknown_key"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"hotcert_jwt_key_reload_total", "hotcert_jwt_reload_failures_total", "hotcert_jwt_signing_key_info",
		"hotcert_jwt_verification_keys", "hotcert_jwt_verifications_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(rec, "hotcert_jwt_key_last_reload_timestamp_seconds"); n != 1 {
		t.Fatalf("%d last-reload series", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

// TestFirstLoadCreatesEveryCounterAtZero: before anything happened, every counter an
// alert may watch exists at 0 — the reload failures, and the verifications for
// "ok" and for every reject reason — so that increase() sees the first one of each.
func TestFirstLoadCreatesEveryCounterAtZero(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec, err := jwtmetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := jwtkeys.New(context.Background(), jwtkeys.NewMemorySource(content(t, jwtkeys.ES256)), jwtkeys.WithObserver(rec), hotcert.WithComponent("agent_tokens"))
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	want := `
# HELP hotcert_jwt_key_reload_total JWT key set reloads by result: one per distinct content change or distinct bad content.
# TYPE hotcert_jwt_key_reload_total counter
hotcert_jwt_key_reload_total{component="agent_tokens",result="failure"} 0
hotcert_jwt_key_reload_total{component="agent_tokens",result="success"} 0
# HELP hotcert_jwt_reload_failures_total JWT key content that failed to load while the last good keys kept serving. Alert on any increase.
# TYPE hotcert_jwt_reload_failures_total counter
hotcert_jwt_reload_failures_total{component="agent_tokens"} 0
# HELP hotcert_jwt_verifications_total Tokens verified, by result: ok or the reason they were rejected.
# TYPE hotcert_jwt_verifications_total counter
hotcert_jwt_verifications_total{component="agent_tokens",result="ok"} 0
`
	for _, r := range jwtkeys.RejectReasons() {
		want += `hotcert_jwt_verifications_total{component="agent_tokens",result="` + string(r) + `"} 0
`
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"hotcert_jwt_key_reload_total", "hotcert_jwt_reload_failures_total", "hotcert_jwt_verifications_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec, err := jwtmetrics.New(reg, metrics.WithPrefix("dexaflow"), metrics.WithComponentLabel("listener"), metrics.WithResultValues("success", "error"))
	if err != nil {
		t.Fatal(err)
	}
	rec.ObserveFailure("agent_grpc", nil)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP dexaflow_jwt_reload_failures_total JWT key content that failed to load while the last good keys kept serving. Alert on any increase.
# TYPE dexaflow_jwt_reload_failures_total counter
dexaflow_jwt_reload_failures_total{listener="agent_grpc"} 1
`), "dexaflow_jwt_reload_failures_total"); err != nil {
		t.Fatal(err)
	}
	if _, err := jwtmetrics.New(nil, metrics.WithResultValues("x", "x")); err == nil {
		t.Fatal("equal result values accepted")
	}
}
