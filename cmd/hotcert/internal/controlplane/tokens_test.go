package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtfile"
	"github.com/hotcert/hotcert/source/file"
)

// Agent tokens: replicas verify and issue them with a jwtkeys.KeySet over a
// kubelet-style key directory (signing.key, verify.pem), agents present a bootstrap
// token and then the fresh ones the replicas hand them over their streams.

const tokenTTL = time.Minute

// signingKey is a generated ES256 key with its public key and kid.
type signingKey struct {
	priv, pub []byte
	kid       string
}

func newSigningKey(t *testing.T) signingKey {
	t.Helper()
	priv, err := jwtkeys.GenerateSigningKey(jwtkeys.ES256)
	if err != nil {
		t.Fatal(err)
	}
	pub, kid, err := jwtkeys.PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{priv: priv, pub: pub, kid: kid}
}

// keyDir is a key directory as the kubelet projects a Secret.
type keyDir struct{ *hotcerttest.AtomicWriter }

func newKeyDir(t *testing.T, signing signingKey, verify ...signingKey) *keyDir {
	d := &keyDir{hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "agent-token-keys"))}
	d.set(t, signing, verify...)
	return d
}

// set writes signing.key and verify.pem (the public keys of verify) in one update.
func (d *keyDir) set(t *testing.T, signing signingKey, verify ...signingKey) {
	t.Helper()
	var pem []byte
	for _, k := range verify {
		pem = append(pem, k.pub...)
	}
	if _, err := d.Write(map[string][]byte{jwtkeys.SigningKeyName: signing.priv, jwtkeys.VerificationKeysName: pem}); err != nil {
		t.Fatal(err)
	}
}

// newKeySet runs a KeySet over dir until the test ends.
func newKeySet(t *testing.T, dir string) *jwtkeys.KeySet {
	t.Helper()
	src, err := jwtfile.New(jwtfile.Dir(dir), file.WithRewatchInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ks, err := jwtkeys.New(ctx, src, jwtkeys.WithMaxTokenTTL(tokenTTL), jwtkeys.WithClockSkew(time.Second),
		hotcert.WithSettle(50*time.Millisecond), hotcert.WithPollInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ks.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		ks.Close()
		if err := <-done; err != nil {
			t.Errorf("KeySet.Start: %v", err)
		}
	})
	return ks
}

// withTokens makes a replica authenticate agents with ks.
func withTokens(ks *jwtkeys.KeySet) func(*controlplane.Config) {
	return func(c *controlplane.Config) { c.Tokens = ks }
}

// bootstrap gives every agent a bootstrap token for its own id, issued by ks.
func bootstrap(t *testing.T, ks *jwtkeys.KeySet) func(*agent.Config) {
	return func(c *agent.Config) { c.Token = jwtkeys.StaticToken(issue(t, ks, c.ID)) }
}

func issue(t *testing.T, ks *jwtkeys.KeySet, subject string) string {
	t.Helper()
	tok, err := ks.Issue(subject, tokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// requireNoRejections fails the test if a replica refused a token.
func requireNoRejections(t *testing.T, step string, replicas []*replica) {
	t.Helper()
	for _, r := range replicas {
		if st := r.srv.Stats(); st.TokensRejected != 0 {
			t.Fatalf("%s: %s refused %d tokens (%v), want 0:\n%s", step, r.name, st.TokensRejected, st.TokensRejectedByReason,
				lastLine(r.logs.String(), "agent token rejected"))
		}
	}
}

// requireTokenKid waits until every agent holds a token signed by kid.
func requireTokenKid(t *testing.T, what string, agents []*testAgent, kid string) {
	t.Helper()
	testutil.WaitFor(t, what, func() bool {
		for _, a := range agents {
			if a.Stats().TokenKeyID != kid {
				return false
			}
		}
		return true
	})
}

// An agent whose token is missing, issued to another agent, signed by a key the
// replica does not know, or expired is refused with Unauthenticated, at once (not
// after a timeout), and counted by reason; an agent with its own token connects and
// is handed a fresh one. Both server paths are covered: a plain gRPC server and a
// draining one (one gRPC server per connection).
func TestTokensAreRequired(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain bool
	}{{"plain", false}, {"drain", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ca := hotcerttest.MustNewCA()
			key := newSigningKey(t)
			ks := newKeySet(t, newKeyDir(t, key).Dir())
			r := startReplica(t, "cp-0", ca.MustIssue(), withTokens(ks), func(c *controlplane.Config) {
				if tc.drain {
					c.DrainWindow = time.Second
				}
			})
			vol := newCAVolume(t, ca)
			good := startAgents(t, 2, []*replica{r}, vol, bootstrap(t, ks))
			for _, a := range good {
				if st := a.Stats(); st.TokensReceived == 0 || st.TokenKeyID != key.kid || st.TokenExpires == nil {
					t.Fatalf("%s connected but holds no fresh token: %+v", a.ID(), st)
				}
			}

			stranger := newKeySet(t, newKeyDir(t, newSigningKey(t)).Dir())
			expired, err := ks.Sign(jwt.RegisteredClaims{Subject: "agent-expired",
				IssuedAt: jwt.NewNumericDate(time.Now().Add(-2 * time.Minute)), ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))})
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []struct {
				id, reason string
				token      jwtkeys.TokenSource
			}{
				{"agent-none", controlplane.AuthReasonMissing, nil},
				{"agent-other", controlplane.AuthReasonSubject, jwtkeys.StaticToken(issue(t, ks, "agent-someone-else"))},
				{"agent-unknown-key", string(jwtkeys.ReasonUnknownKey), jwtkeys.StaticToken(issue(t, stranger, "agent-unknown-key"))},
				{"agent-expired", string(jwtkeys.ReasonExpired), jwtkeys.StaticToken(expired)},
			} {
				var mu sync.Mutex
				var failed []agent.Event
				a, err := agent.New(agent.Config{
					ID: bad.id, Server: r.addr, ServerName: "localhost", CAFile: vol.path(), Token: bad.token,
					// An hour: a refusal seen within the wait below came at once, not
					// after a deadline.
					ConnectTimeout: time.Hour, MinBackoff: time.Hour, MaxBackoff: time.Hour,
					OnEvent: func(e agent.Event) {
						if e.Kind == agent.EventConnectFailed {
							mu.Lock()
							failed = append(failed, e)
							mu.Unlock()
						}
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				runAgent(t, a)
				testutil.WaitFor(t, bad.id+" to be refused", func() bool { mu.Lock(); defer mu.Unlock(); return len(failed) > 0 })
				mu.Lock()
				ev := failed[0]
				mu.Unlock()
				if ev.Reason != agentrpc.ReasonUnauthenticated || status.Code(ev.Err) != codes.Unauthenticated {
					t.Errorf("%s: failed with reason %q, %v; want unauthenticated", bad.id, ev.Reason, ev.Err)
				}
				if st := a.Stats(); st.Connects != 0 || st.ConnectFailuresByReason[agentrpc.ReasonUnauthenticated] != 1 || st.HandshakeFailures != 0 {
					t.Errorf("%s: %+v", bad.id, st)
				}
				if bad.reason != controlplane.AuthReasonMissing && strings.Contains(ev.Err.Error(), "eyJ") {
					t.Errorf("%s: the error shows the token: %v", bad.id, ev.Err)
				}
				testutil.WaitFor(t, "the rejection to be counted", func() bool {
					return r.srv.Stats().TokensRejectedByReason[bad.reason] == 1
				})
				if v := metricValue(t, r.reg, "hotcert_controlplane_token_rejections_total", map[string]string{"reason": bad.reason}); v != 1 {
					t.Errorf("hotcert_controlplane_token_rejections_total{reason=%q} = %v, want 1", bad.reason, v)
				}
			}
			if n := r.logs.Count("agent token rejected"); n != 4 {
				t.Errorf("%d rejection lines, want 4:\n%s", n, r.logs)
			}
			if !strings.Contains(r.logs.String(), `agent=agent-other`) {
				t.Errorf("the subject rejection does not name the agent:\n%s", r.logs)
			}
			if st := r.srv.Stats(); st.ConnectedAgents != len(good) || st.HandshakeFailures != 0 {
				t.Fatalf("server: %+v", st)
			}
			if s := r.srv.Status(); s.Tokens == nil || s.Tokens.SigningKeyID != key.kid || len(s.Tokens.Keys) != 1 || s.Tokens.LastError != "" {
				t.Fatalf("status tokens: %+v", s.Tokens)
			}
		})
	}
}

// The durable rotation of the signing key with agents connected to two replicas
// (one plain, one draining) that share the key directory: the next key is published,
// then signs while the previous one stays listed, then the previous one is removed.
// Agents receive tokens of the new key over their streams (heartbeat
// acknowledgements) before the old key goes, and reconnect after every step: no
// token is refused, no handshake fails, and the removed key's tokens are refused.
func TestSigningKeyRotationRejectsNoAgent(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	keyA, keyB := newSigningKey(t), newSigningKey(t)
	dir := newKeyDir(t, keyA)
	ks0, ks1 := newKeySet(t, dir.Dir()), newKeySet(t, dir.Dir())
	replicas := []*replica{
		startReplica(t, "cp-0", leaf, withTokens(ks0)),
		startReplica(t, "cp-1", leaf, withTokens(ks1), func(c *controlplane.Config) { c.DrainWindow = time.Second }),
	}
	sets := []*jwtkeys.KeySet{ks0, ks1}
	vol := newCAVolume(t, ca)
	agents := startAgents(t, nAgents, replicas, vol, bootstrap(t, ks0))
	requireTokenKid(t, "tokens of key A", agents, keyA.kid)
	oldToken := issue(t, ks1, "agent-00")
	verifies := func(ks *jwtkeys.KeySet, kid string) bool {
		for _, k := range ks.Info().Keys {
			if k.ID == kid {
				return true
			}
		}
		return false
	}

	// Step 1: publish B; A signs.
	dir.set(t, keyA, keyB)
	testutil.WaitFor(t, "every replica to verify key B", func() bool { return verifies(ks0, keyB.kid) && verifies(ks1, keyB.kid) })
	reconnectAll(t, replicas, agents)
	requireNoFailures(t, "publish the next key", replicas, agents)
	requireNoRejections(t, "publish the next key", replicas)

	// Step 2: B signs, A stays listed. Connected agents get B tokens with their next
	// heartbeat acknowledgement, without reconnecting.
	connects := sum(agents).connects
	dir.set(t, keyB, keyA)
	testutil.WaitFor(t, "every replica to sign with key B", func() bool {
		return ks0.SigningKeyID() == keyB.kid && ks1.SigningKeyID() == keyB.kid
	})
	requireTokenKid(t, "agents to hold tokens of key B", agents, keyB.kid)
	if n := sum(agents).connects; n != connects {
		t.Fatalf("%d reconnects while new tokens were handed out, want 0", n-connects)
	}
	if _, err := ks0.Verify(oldToken); err != nil {
		t.Fatalf("a token of key A while A is listed: %v", err)
	}
	reconnectAll(t, replicas, agents)
	requireTokenKid(t, "agents to hold tokens of key B after reconnecting", agents, keyB.kid)
	requireNoFailures(t, "sign with the next key", replicas, agents)
	requireNoRejections(t, "sign with the next key", replicas)

	// Step 3: remove A. Every agent re-authenticates with a B token.
	dir.set(t, keyB)
	testutil.WaitFor(t, "every replica to drop key A", func() bool { return !verifies(ks0, keyA.kid) && !verifies(ks1, keyA.kid) })
	reconnectAll(t, replicas, agents)
	requireNoFailures(t, "remove the previous key", replicas, agents)
	requireNoRejections(t, "remove the previous key", replicas)
	requireTokenKid(t, "tokens of key B", agents, keyB.kid)
	for i, ks := range sets {
		if _, err := ks.Verify(oldToken); jwtkeys.RejectReasonOf(err) != jwtkeys.ReasonUnknownKey {
			t.Fatalf("cp-%d: a token of the removed key: %v, want unknown_key", i, err)
		}
	}

	// An agent that still presents a token of the removed key is refused.
	late := agentWithToken(t, replicas[1], vol, "agent-late", jwtkeys.StaticToken(oldToken))
	testutil.WaitFor(t, "the late agent to be refused", func() bool { return late.Stats().ConnectFailures > 0 })
	if st := late.Stats(); st.Connects != 0 || st.ConnectFailuresByReason[agentrpc.ReasonUnauthenticated] == 0 {
		t.Fatalf("late agent with a removed key's token: %+v", st)
	}
	if n := replicas[1].srv.Stats().TokensRejectedByReason[string(jwtkeys.ReasonUnknownKey)]; n == 0 {
		t.Fatal("the removed key's token was not counted as unknown_key")
	}
}

// agentWithToken runs one agent presenting src to r.
func agentWithToken(t *testing.T, r *replica, vol *caVolume, id string, src jwtkeys.TokenSource, mutate ...func(*agent.Config)) *testAgent {
	t.Helper()
	return startAgent(t, r, agent.Config{ID: id, ServerName: "localhost", CAFile: vol.path(), Token: src}, mutate...)
}

// A token the agent holds that the replica refuses (its key was revoked while the
// agent was connected and heard nothing new) is dropped: the next attempt presents
// the bootstrap token file, re-read, which the operator renewed.
func TestAgentFallsBackOnItsBootstrapTokenWhenTheHeldOneIsRefused(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	keyA, keyB := newSigningKey(t), newSigningKey(t)
	dir := newKeyDir(t, keyA)
	ks := newKeySet(t, dir.Dir())
	r := startReplica(t, "cp-0", ca.MustIssue(), withTokens(ks))
	vol := newCAVolume(t, ca)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(issue(t, ks, "agent-0")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Heartbeats far apart: the agent gets no token of the new key before the old one
	// is revoked.
	a := agentWithToken(t, r, vol, "agent-0", jwtkeys.NewFileTokenSource(tokenFile), func(c *agent.Config) {
		c.HeartbeatInterval, c.HeartbeatTimeout = time.Hour, 2*time.Hour
	})
	testutil.WaitFor(t, "the agent to connect", func() bool { return a.Stats().Connected })
	if st := a.Stats(); st.TokenKeyID != keyA.kid {
		t.Fatalf("held token kid %q, want key A's", st.TokenKeyID)
	}

	// Emergency revocation of A: B signs with A listed, then A is removed.
	dir.set(t, keyB, keyA)
	testutil.WaitFor(t, "key B to sign", func() bool { return ks.SigningKeyID() == keyB.kid })
	dir.set(t, keyB)
	testutil.WaitFor(t, "key A to be removed", func() bool { return len(ks.Info().Keys) == 1 })
	if err := os.WriteFile(tokenFile, []byte(issue(t, ks, "agent-0")), 0o600); err != nil {
		t.Fatal(err)
	}
	r.srv.DropConnections()
	testutil.WaitFor(t, "the agent to reconnect with its renewed bootstrap token", func() bool {
		st := a.Stats()
		return st.Connected && st.Connects == 2
	})
	st := a.Stats()
	if st.ConnectFailuresByReason[agentrpc.ReasonUnauthenticated] != 1 || st.TokenKeyID != keyB.kid {
		t.Fatalf("want one refused attempt with the revoked token, then a key B token: %+v", st)
	}
	if n := r.srv.Stats().TokensRejectedByReason[string(jwtkeys.ReasonUnknownKey)]; n != 1 {
		t.Fatalf("rejections %v, want one unknown_key", r.srv.Stats().TokensRejectedByReason)
	}
	if !strings.Contains(lastLine(a.logs.String(), "control plane connection failed"), "reason=unauthenticated") {
		t.Fatal("the refused attempt is not logged with reason=unauthenticated")
	}
}

func TestTokenConfigErrors(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	ks := newKeySet(t, newKeyDir(t, newSigningKey(t)).Dir())
	leaf := ca.MustIssue()
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if os.WriteFile(crt, leaf.ChainPEM, 0o600) != nil || os.WriteFile(key, leaf.KeyPEM, 0o600) != nil {
		t.Fatal("writing the key pair")
	}
	src := func() controlplane.Config {
		fs, err := file.New(file.WithKeyPair(crt, key))
		if err != nil {
			t.Fatal(err)
		}
		return controlplane.Config{TLS: fs, Tokens: ks}
	}
	for _, tc := range []struct {
		mutate func(*controlplane.Config)
		want   string
	}{
		{func(c *controlplane.Config) { c.TokenTTL = 2 * tokenTTL }, "maximum token lifetime"},
		{func(c *controlplane.Config) { c.TokenTTL, c.TokenRenewAfter = 10*time.Second, 10*time.Second }, "before they expire"},
		{func(c *controlplane.Config) { c.TokenTTL = -time.Second }, "negative"},
	} {
		cfg := src()
		tc.mutate(&cfg)
		if _, err := controlplane.New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want an error containing %q", err, tc.want)
		}
	}
}
