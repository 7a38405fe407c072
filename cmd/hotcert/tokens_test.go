package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtfile"
)

type testKey struct {
	priv, pub []byte
	kid       string
}

func newTestKey(t *testing.T) testKey {
	t.Helper()
	priv, err := jwtkeys.GenerateSigningKey(jwtkeys.ES256)
	if err != nil {
		t.Fatal(err)
	}
	pub, kid, err := jwtkeys.PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv, pub, kid}
}

func keyFiles(signing testKey, verify ...testKey) map[string][]byte {
	var pem []byte
	for _, k := range verify {
		pem = append(pem, k.pub...)
	}
	return map[string][]byte{jwtkeys.SigningKeyName: signing.priv, jwtkeys.VerificationKeysName: pem}
}

// mintToken issues a bootstrap token for subject with the keys of dir, as an
// operator's enrollment tooling would.
// mintToken mints a bootstrap token as an operator does: hotcert token issue.
func mintToken(t *testing.T, dir, subject string) string {
	t.Helper()
	out, _, err := run(context.Background(), "token", "issue", "--jwt-key-dir", dir, "--subject", subject, "--ttl", "10m")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `hotcert server --jwt-key-dir` and `hotcert agent --token-file`, wired as an
// operator runs them: the agent authenticates with its bootstrap token and is handed
// fresh ones; /healthz, /metrics and /.well-known/jwks.json show the keys; a
// signing-key rotation reaches the agent over its stream; a bad key file keeps the
// last good keys and shows in /healthz; an agent presenting another agent's token is
// refused with reason unauthenticated.
func TestServerAndAgentWithTokens(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	caFile := writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca))
	keyA, keyB := newTestKey(t), newTestKey(t)
	keys := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "agent-token-keys"))
	keys.MustWrite(keyFiles(keyA))
	tokenFile := writeTemp(t, "token", []byte(mintToken(t, keys.Dir(), "agent-1")+"\n"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverLog, agentLog, strangerLog := &testutil.LogBuffer{}, &testutil.LogBuffer{}, &testutil.LogBuffer{}
	serverDone := start(ctx, serverLog, "server", "--log-format", "json", "--listen", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0",
		"--cert-file", crt, "--key-file", key, "--settle", "50ms", "--poll-interval", "100ms",
		"--jwt-key-dir", keys.Dir(), "--jwt-max-ttl", "10m", "--jwt-token-ttl", "3s")
	addr := logAttr(t, serverLog, "control plane listening", "addr")
	metricsAddr := logAttr(t, serverLog, "metrics and health listening", "addr")
	if line := findLine(serverLog.String(), "control plane listening"); line["agent_tokens"] != true || line["token_ttl"] != "3s" {
		t.Fatalf("listening line %v: want agent_tokens=true token_ttl=3s", line)
	}
	agentDone := start(ctx, agentLog, "agent", "--log-format", "json", "--server", addr, "--server-name", "localhost",
		"--ca-file", caFile, "--heartbeat-interval", "100ms", "--metrics-bind-address", "127.0.0.1:0", "--id", "agent-1", "--token-file", tokenFile)
	logAttr(t, agentLog, "connected to control plane", "replica")
	agentMetrics := logAttr(t, agentLog, "metrics and health listening", "addr")

	var st controlplane.Status
	if code := getJSON(t, "http://"+metricsAddr+"/healthz", &st); code != 200 || st.Tokens == nil || st.Tokens.SigningKeyID != keyA.kid ||
		st.Tokens.Algorithm != jwtkeys.ES256 || st.Tokens.TokenTTL != "3s" || st.Stats.TokensIssued == 0 || st.Stats.ConnectedAgents != 1 {
		t.Fatalf("server /healthz: %d %+v tokens %+v", code, st, st.Tokens)
	}
	if code, body := getBody(t, "http://"+metricsAddr+"/.well-known/jwks.json"); code != 200 || !strings.Contains(body, keyA.kid) {
		t.Fatalf("jwks: %d %s", code, body)
	}
	requireMetric(t, metricsAddr, `hotcert_jwt_signing_key_info{alg="ES256",component="jwt_signing",kid="`+keyA.kid+`"} 1`)
	requireMetric(t, metricsAddr, `hotcert_jwt_verifications_total{component="jwt_signing",result="ok"} 1`)
	requireMetric(t, agentMetrics, `hotcert_agent_connected 1`)

	// Tokens are renewed over the stream (TTL 3s: after 1s) and rotated with the key.
	var ast agent.Status
	testutil.WaitFor(t, "a renewed token", func() bool {
		getJSON(t, "http://"+agentMetrics+"/healthz", &ast)
		return ast.Stats.TokensReceived >= 2
	})
	keys.MustWrite(keyFiles(keyB, keyA))
	testutil.WaitFor(t, "the agent to hold a token of the new key", func() bool {
		getJSON(t, "http://"+agentMetrics+"/healthz", &ast)
		return ast.Stats.TokenKeyID == keyB.kid
	})
	if code, body := getBody(t, "http://"+metricsAddr+"/.well-known/jwks.json"); code != 200 || !strings.Contains(body, keyA.kid) || !strings.Contains(body, keyB.kid) {
		t.Fatalf("jwks after the rotation: %d %s", code, body)
	}
	if n := strings.Count(serverLog.String(), `"msg":"JWT signing key rotated"`); n != 1 {
		t.Fatalf("%d rotation lines, want 1", n)
	}

	// A truncated signing key: last good keys kept, reported once and in /healthz.
	keys.MustWrite(map[string][]byte{jwtkeys.SigningKeyName: hotcerttest.Truncate(keyB.priv), jwtkeys.VerificationKeysName: keyA.pub})
	testutil.WaitFor(t, "the failure line", func() bool { return findLine(serverLog.String(), "JWT signing key reload failed") != nil })
	if code := getJSON(t, "http://"+metricsAddr+"/healthz", &st); code != 200 || st.Tokens.LastError == "" || st.Tokens.SigningKeyID != keyB.kid || st.Tokens.ReloadFailures != 1 {
		t.Fatalf("server /healthz after a bad key: %d tokens %+v", code, st.Tokens)
	}
	requireMetric(t, metricsAddr, `hotcert_jwt_reload_failures_total{component="jwt_signing"} 1`)

	// Another agent id with agent-1's bootstrap token: refused, reason unauthenticated.
	strangerDone := start(ctx, strangerLog, "agent", "--log-format", "json", "--server", addr, "--server-name", "localhost",
		"--ca-file", caFile, "--id", "agent-2", "--token-file", tokenFile, "--min-backoff", "1h", "--max-backoff", "1h")
	if r := logAttr(t, strangerLog, "control plane connection failed", "reason"); r != "unauthenticated" {
		t.Fatalf("stranger failed with reason %q, want unauthenticated", r)
	}
	testutil.WaitFor(t, "the rejection line", func() bool { return findLine(serverLog.String(), "agent token rejected") != nil })
	if line := findLine(serverLog.String(), "agent token rejected"); line["reason"] != "subject" || line["agent"] != "agent-2" {
		t.Fatalf("rejection line %v", line)
	}
	requireMetric(t, metricsAddr, `hotcert_controlplane_token_rejections_total{reason="subject"} 1`)

	cancel()
	for name, done := range map[string]chan error{"server": serverDone, "agent": agentDone, "stranger": strangerDone} {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s returned %v on cancel, want nil", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not stop on cancel", name)
		}
	}
	for name, logs := range map[string]string{"server": serverLog.String(), "agent": agentLog.String()} {
		if strings.Contains(logs, "PRIVATE KEY") || strings.Contains(logs, "eyJ") {
			t.Errorf("the %s log shows key material or a token", name)
		}
	}
}

func TestTokenFlagErrors(t *testing.T) {
	ctx := context.Background()
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	empty := t.TempDir()
	keys := t.TempDir()
	if err := os.WriteFile(filepath.Join(keys, jwtkeys.SigningKeyName), newTestKey(t).priv, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, jwtkeys.SigningKeyName), leaf.KeyPEM[:40], 0o600); err != nil {
		t.Fatal(err)
	}
	server := []string{"server", "--listen", "127.0.0.1:0", "--cert-file", crt, "--key-file", key}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(server, "--jwt-key-dir", empty), filepath.Join(empty, jwtkeys.SigningKeyName)},
		{append(server, "--jwt-key-dir", bad), filepath.Join(bad, jwtkeys.SigningKeyName)},
		{append(server, "--jwt-key-dir", keys, "--jwt-token-ttl", "2h"), "--jwt-token-ttl"},
		{append(server, "--jwt-key-dir", keys, "--jwt-grace", "1m"), "grace"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--ca-file", writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca)), "--token-file", filepath.Join(empty, "token")}, "--token-file"},
	} {
		_, _, err := run(ctx, tc.args...)
		requireOneLine(t, err, tc.want)
		requireUserTerms(t, err)
	}
}

func TestCheckKeyDir(t *testing.T) {
	ctx := context.Background()
	keyA, keyB := newTestKey(t), newTestKey(t)
	dir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "keys"))
	dir.MustWrite(keyFiles(keyA, keyB))

	out, _, err := run(ctx, "check", "--jwt-key-dir", dir.Dir())
	if err != nil || !strings.Contains(out, "signs:  kid "+keyA.kid+" (ES256)") || !strings.Contains(out, keyB.kid+" (ES256, listed)") || !strings.Contains(out, "OK:") {
		t.Fatalf("check --jwt-key-dir: err %v, output:\n%s", err, out)
	}
	out, _, err = run(ctx, "check", "--jwt-key-dir", dir.Dir(), "-o", "json")
	var rep keyDirReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || rep.SigningKeyID != keyA.kid || len(rep.Keys) != 2 || rep.Keys[1].State != "listed" {
		t.Fatalf("check --jwt-key-dir -o json: err %v, output:\n%s", err, out)
	}
	if strings.Contains(out, "PRIVATE KEY") {
		t.Fatal("the report shows key material")
	}

	// HS256 secrets.
	secret, err := jwtkeys.GenerateHMACSecret()
	if err != nil {
		t.Fatal(err)
	}
	hmacDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hmacDir, jwtkeys.HMACSecretsName), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(ctx, "check", "--jwt-key-dir", hmacDir); err != nil || !strings.Contains(out, "(HS256)") {
		t.Fatalf("check of an hs256.keys directory: %v\n%s", err, out)
	}

	// A truncated verify.pem: refused as a whole, one line, JSON names the file.
	dir.MustWrite(map[string][]byte{jwtkeys.SigningKeyName: keyA.priv, jwtkeys.VerificationKeysName: hotcerttest.Truncate(append(append([]byte{}, keyA.pub...), keyB.pub...))})
	out, _, err = run(ctx, "check", "--jwt-key-dir", dir.Dir(), "-o", "json")
	requireOneLine(t, err, jwtkeys.VerificationKeysName)
	if json.Unmarshal([]byte(out), &rep) != nil || rep.OK || rep.Reason == "" || !strings.HasSuffix(rep.Input, jwtkeys.VerificationKeysName) {
		t.Fatalf("check -o json of a truncated verify.pem:\n%s", out)
	}
	out, _, err = run(ctx, "check", "--jwt-key-dir", dir.Dir())
	requireOneLine(t, err, jwtkeys.VerificationKeysName)
	if !strings.Contains(out, "INVALID (") {
		t.Fatalf("text output of a truncated verify.pem:\n%s", out)
	}
	_, _, err = run(ctx, "check", "--jwt-key-dir", dir.Dir(), "--ca-file", "x")
	requireOneLine(t, err, "not both")
}

// --metrics-prefix and --metrics-component-label rename the JWT series as they
// do the TLS ones: one dashboard, one naming.
func TestServerMetricsPrefixRenamesJWTSeries(t *testing.T) {
	leaf := hotcerttest.MustNewCA().MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	k := newTestKey(t)
	keys := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "agent-token-keys"))
	keys.MustWrite(keyFiles(k))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverLog := &testutil.LogBuffer{}
	done := start(ctx, serverLog, "server", "--log-format", "json", "--listen", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0",
		"--cert-file", crt, "--key-file", key, "--jwt-key-dir", keys.Dir(),
		"--metrics-prefix", "dexaflow", "--metrics-component-label", "listener")
	metricsAddr := logAttr(t, serverLog, "metrics and health listening", "addr")
	requireMetric(t, metricsAddr, `dexaflow_jwt_signing_key_info{alg="ES256",kid="`+k.kid+`",listener="jwt_signing"} 1`)
	text := metricsText(t, metricsAddr)
	if !strings.Contains(text, "dexaflow_tls_cert_reload_total{") {
		t.Fatal("the TLS series are not renamed")
	}
	if strings.Contains(text, "hotcert_jwt_") || strings.Contains(text, "hotcert_tls_") {
		t.Fatal("series keep the default prefix")
	}
	// The label's name is the log key too: listener=agent_grpc on the server's lines.
	for _, msg := range []string{"TLS certificate loaded", "control plane listening"} {
		if line := findLine(serverLog.String(), msg); line == nil || line["listener"] != "agent_grpc" || line["component"] != nil {
			t.Errorf("%q line %v: want listener=agent_grpc (the metrics' component label) and no component key", msg, line)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// hotcert token issue: a token the key set verifies, for the subject and
// lifetime asked, printed or written 0600; the log names the key and expiry,
// never the token; bad input is a one-line error.
func TestTokenIssue(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t)
	keys := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "agent-token-keys"))
	keys.MustWrite(keyFiles(k))
	out, stderr, err := run(ctx, "--log-format", "json", "token", "issue", "--jwt-key-dir", keys.Dir(), "--subject", "agent-42", "--ttl", "24h", "--jwt-audience", "agents")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out)
	src, err := jwtfile.New(jwtfile.Dir(keys.Dir()))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := jwtkeys.New(ctx, src, jwtkeys.WithMaxTokenTTL(24*time.Hour), jwtkeys.WithAudience("agents"))
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	claims, err := ks.Verify(tok)
	if err != nil {
		t.Fatalf("the issued token does not verify: %v", err)
	}
	if life := claims.ExpiresAt.Sub(claims.IssuedAt.Time); claims.Subject != "agent-42" || life != 24*time.Hour {
		t.Fatalf("sub %q, lifetime %s; want agent-42, 24h", claims.Subject, life)
	}
	line := findLine(stderr, "issued agent token")
	if line == nil || line["kid"] != k.kid || line["subject"] != "agent-42" || line["expires"] != claims.ExpiresAt.UTC().Format(time.RFC3339) {
		t.Fatalf("log line %v", line)
	}
	if strings.Contains(stderr, tok[len(tok)-20:]) {
		t.Fatal("the log shows the token")
	}

	file := filepath.Join(t.TempDir(), "agent.token")
	if out, _, err := run(ctx, "token", "issue", "--jwt-key-dir", keys.Dir(), "--subject", "agent-42", "--out", file); err != nil || out != "" {
		t.Fatalf("--out: %v, stdout %q", err, out)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	b, _ := os.ReadFile(file)
	if _, err := ks.Verify(strings.TrimSpace(string(b))); err == nil {
		t.Fatal("a token without the audience verified against a set requiring one")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "issue", "--jwt-key-dir", keys.Dir()}, "--subject"},
		{[]string{"token", "issue", "--subject", "a"}, "give the signing keys: --jwt-key-dir"},
		{[]string{"token", "issue", "--jwt-key-dir", keys.Dir(), "--subject", "a", "--ttl", "0s"}, "--ttl"},
		{[]string{"token", "issue", "--jwt-key-dir", t.TempDir(), "--subject", "a"}, "--jwt-key-dir: "},
	} {
		_, _, err := run(ctx, tc.args...)
		requireOneLine(t, err, tc.want)
		requireUserTerms(t, err)
	}
}
