package jwtgrpc_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtgrpc"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const (
	ttl   = 10 * time.Minute
	skew  = 30 * time.Second
	grace = 15 * time.Minute
)

// controlPlane is a gRPC server over TLS whose RPCs need a token from ks.
type controlPlane struct {
	addr     string
	ca       *hotcerttest.CA
	ks       *jwtkeys.KeySet
	src      *jwtkeys.MemorySource
	clock    *clock
	health   *health.Server
	mu       sync.Mutex
	subjects []string
	rejected []error
}

func keyContent(t *testing.T, alg string) jwtkeys.Content {
	t.Helper()
	priv, err := jwtkeys.GenerateSigningKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	return jwtkeys.Content{SigningKey: hotcert.Input{Name: "signing.key", Data: priv}}
}

func startControlPlane(t *testing.T, opts ...jwtgrpc.Option) *controlPlane {
	t.Helper()
	cp := &controlPlane{ca: hotcerttest.MustNewCA(), clock: &clock{t: time.Now()}, health: health.NewServer()}
	cp.src = jwtkeys.NewMemorySource(keyContent(t, jwtkeys.ES256))
	ks, err := jwtkeys.New(context.Background(), cp.src, jwtkeys.WithClock(cp.clock.Now), jwtkeys.WithMaxTokenTTL(ttl),
		jwtkeys.WithClockSkew(skew), jwtkeys.WithGracePeriod(grace), jwtkeys.WithAudience("control-plane"), hotcert.WithSettle(0))
	if err != nil {
		t.Fatal(err)
	}
	cp.ks = ks
	t.Cleanup(func() { ks.Close() })

	leaf := cp.ca.MustIssue()
	opts = append(opts, jwtgrpc.WithRejectionHook(func(_ context.Context, _ string, err error) {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.rejected = append(cp.rejected, err)
	}))
	capture := func(ctx context.Context) {
		if c, ok := jwtgrpc.ClaimsFromContext(ctx); ok {
			cp.mu.Lock()
			cp.subjects = append(cp.subjects, c.Subject)
			cp.mu.Unlock()
		}
	}
	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}})),
		grpc.ChainUnaryInterceptor(jwtgrpc.UnaryServerInterceptor(ks, opts...),
			func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				capture(ctx)
				return h(ctx, req)
			}),
		grpc.ChainStreamInterceptor(jwtgrpc.StreamServerInterceptor(ks, opts...),
			func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				capture(ss.Context())
				return h(srv, ss)
			}),
	)
	healthpb.RegisterHealthServer(srv, cp.health)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	cp.addr = ln.Addr().String()
	return cp
}

func (cp *controlPlane) rotate(t *testing.T, alg string) {
	t.Helper()
	cp.src.Set(keyContent(t, alg))
	if err := cp.ks.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// agent dials cp over TLS, presenting src's token on every RPC.
func (cp *controlPlane) agent(t *testing.T, src jwtkeys.TokenSource) healthpb.HealthClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: hotcerttest.Pool(cp.ca), ServerName: "localhost"}))}
	if src != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(jwtgrpc.NewPerRPCCredentials(src)))
	}
	conn, err := grpc.NewClient(cp.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func check(c healthpb.HealthClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if s, _ := status.FromError(err); s.Code() != code || !strings.Contains(s.Message(), msg) {
		t.Fatalf("got %v, want %s containing %q", err, code, msg)
	}
}

// TestAgentsSurviveRotations: agents holding tokens signed before a rotation keep
// getting through; agents renewing tokens get new ones; after the grace period a
// token of the old key is refused.
func TestAgentsSurviveRotations(t *testing.T) {
	cp := startControlPlane(t)
	held, err := cp.ks.Issue("agent-held", ttl)
	if err != nil {
		t.Fatal(err)
	}
	holder := cp.agent(t, jwtkeys.StaticToken(held))
	renewer := cp.agent(t, jwtkeys.NewIssuingTokenSource(cp.ks, "agent-renewing", ttl, jwtkeys.WithRenewClock(cp.clock.Now)))
	for _, c := range []healthpb.HealthClient{holder, renewer} {
		if err := check(c); err != nil {
			t.Fatal(err)
		}
	}
	cp.rotate(t, jwtkeys.EdDSA)
	cp.clock.Advance(ttl / 2)
	cp.rotate(t, jwtkeys.RS256)
	for range 3 {
		for _, c := range []healthpb.HealthClient{holder, renewer} {
			if err := check(c); err != nil {
				t.Fatalf("agent rejected during rotations: %v", err)
			}
		}
		cp.clock.Advance(ttl / 4)
	}
	// The held token is past its exp now; the renewing agent is not affected.
	wantCode(t, check(holder), codes.Unauthenticated, "token rejected: expired")
	if err := check(renewer); err != nil {
		t.Fatal(err)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.rejected) != 1 || jwtkeys.RejectReasonOf(cp.rejected[0]) != jwtkeys.ReasonExpired {
		t.Fatalf("rejections %v", cp.rejected)
	}
	if !strings.Contains(strings.Join(cp.subjects, ","), "agent-held") || !strings.Contains(strings.Join(cp.subjects, ","), "agent-renewing") {
		t.Fatalf("claims not in the handler's context: %v", cp.subjects)
	}
}

func TestRejections(t *testing.T) {
	cp := startControlPlane(t)
	wantCode(t, check(cp.agent(t, nil)), codes.Unauthenticated, "missing bearer token")
	wantCode(t, check(cp.agent(t, jwtkeys.StaticToken("garbage"))), codes.Unauthenticated, "token rejected: malformed")

	other := startControlPlane(t) // a token of another control plane's key
	foreign, _ := other.ks.Issue("x", time.Minute)
	wantCode(t, check(cp.agent(t, jwtkeys.StaticToken(foreign))), codes.Unauthenticated, "token rejected: unknown_key")

	// A token never travels over an insecure connection.
	tok, _ := cp.ks.Issue("x", time.Minute)
	conn, err := grpc.NewClient(cp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(jwtgrpc.NewPerRPCCredentials(jwtkeys.StaticToken(tok))))
	if err == nil {
		err = check(healthpb.NewHealthClient(conn))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "transport level security") {
		t.Fatalf("per-RPC credentials over an insecure connection: %v", err)
	}
}

func TestExemptMethods(t *testing.T) {
	cp := startControlPlane(t, jwtgrpc.WithExemptMethods(healthpb.Health_Check_FullMethodName))
	if err := check(cp.agent(t, nil)); err != nil {
		t.Fatalf("exempt method: %v", err)
	}
}

// TestStreamAuthenticatedAtOpen: a stream is authenticated when it opens and keeps
// running across a rotation and beyond its token's lifetime; a new stream presents
// the token the source returns then.
func TestStreamAuthenticatedAtOpen(t *testing.T) {
	cp := startControlPlane(t)
	tok, _ := cp.ks.Issue("agent-stream", ttl)
	c := cp.agent(t, jwtkeys.StaticToken(tok))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cp.rotate(t, jwtkeys.ES256)
	cp.clock.Advance(2 * grace)
	cp.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if m, err := stream.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("open stream after the rotation: %v %v", m, err)
	}
	s2, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = s2.Recv()
	}
	wantCode(t, err, codes.Unauthenticated, "token rejected")
}
