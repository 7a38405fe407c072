// Package jwtgrpc carries jwtkeys tokens over gRPC: per-RPC credentials that attach
// a bearer token on the client, and interceptors that verify it on the server.
//
// Client (agent):
//
//	src := jwtkeys.NewFileTokenSource("/var/run/agent/token")
//	conn, err := grpc.NewClient(addr,
//		grpc.WithTransportCredentials(tlsCreds),
//		grpc.WithPerRPCCredentials(jwtgrpc.NewPerRPCCredentials(src)))
//
// Server (control plane):
//
//	srv := grpc.NewServer(grpc.Creds(tlsCreds),
//		grpc.ChainUnaryInterceptor(jwtgrpc.UnaryServerInterceptor(keySet)),
//		grpc.ChainStreamInterceptor(jwtgrpc.StreamServerInterceptor(keySet)))
//
// and in a handler, jwtgrpc.ClaimsFromContext(ctx) returns the verified claims.
//
// Per-RPC credentials are attached when an RPC or stream starts; a long-lived
// stream is authenticated once, when it opens, and a reconnect presents the token
// the source returns then.
package jwtgrpc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert/jwtkeys"
)

// MetadataKey is the gRPC metadata key carrying the token, as "Bearer <token>".
const MetadataKey = "authorization"

// perRPC implements credentials.PerRPCCredentials over a token source.
type perRPC struct{ src jwtkeys.TokenSource }

// NewPerRPCCredentials returns gRPC per-RPC credentials that attach the token of src
// as "authorization: Bearer <token>" to every RPC and stream. They require transport
// security: gRPC refuses to send them over an insecure connection, so a token never
// travels in clear text. Use them with TLS transport credentials (such as package
// grpccreds'), never with TLS done inside a context dialer (DESIGN trap 8).
func NewPerRPCCredentials(src jwtkeys.TokenSource) credentials.PerRPCCredentials {
	return perRPC{src: src}
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (p perRPC) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if ri, ok := credentials.RequestInfoFromContext(ctx); ok {
		if err := credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity); err != nil {
			return nil, fmt.Errorf("jwtgrpc: refusing to send a token over an insecure connection: %w", err)
		}
	}
	tok, err := p.src.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("jwtgrpc: token: %w", err)
	}
	return map[string]string{MetadataKey: "Bearer " + tok}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: always true.
func (perRPC) RequireTransportSecurity() bool { return true }

// Option configures the server interceptors.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	exempt   []string
	rejected func(ctx context.Context, fullMethod string, err error)
}

// WithExemptMethods lets the given full method names (e.g.
// "/grpc.health.v1.Health/Check") through without a token.
func WithExemptMethods(methods ...string) Option {
	return optionFunc(func(c *config) { c.exempt = append(c.exempt, methods...) })
}

// WithRejectionHook calls fn for every rejected RPC (for logs; it runs on the
// request path). err is a *jwtkeys.VerifyError, or says the token is missing.
func WithRejectionHook(fn func(ctx context.Context, fullMethod string, err error)) Option {
	return optionFunc(func(c *config) { c.rejected = fn })
}

type claimsKey struct{}

// ClaimsFromContext returns the claims the interceptor verified for this RPC.
func ClaimsFromContext(ctx context.Context) (*jwt.RegisteredClaims, bool) {
	c, ok := ctx.Value(claimsKey{}).(*jwt.RegisteredClaims)
	return c, ok
}

// UnaryServerInterceptor verifies the bearer token of every unary RPC with v, and
// fails the RPC with codes.Unauthenticated when it is missing or rejected. The
// status message names the reason (e.g. "expired", "unknown_key"), never the token.
func UnaryServerInterceptor(v jwtkeys.Verifier, opts ...Option) grpc.UnaryServerInterceptor {
	cfg := newConfig(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if slices.Contains(cfg.exempt, info.FullMethod) {
			return handler(ctx, req)
		}
		ctx, err := authenticate(ctx, v, cfg, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor verifies the bearer token when a stream opens, as
// UnaryServerInterceptor does for unary RPCs.
func StreamServerInterceptor(v jwtkeys.Verifier, opts ...Option) grpc.StreamServerInterceptor {
	cfg := newConfig(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if slices.Contains(cfg.exempt, info.FullMethod) {
			return handler(srv, ss)
		}
		ctx, err := authenticate(ss.Context(), v, cfg, info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &stream{ServerStream: ss, ctx: ctx})
	}
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		o.apply(c)
	}
	return c
}

func authenticate(ctx context.Context, v jwtkeys.Verifier, cfg *config, method string) (context.Context, error) {
	tok, err := bearer(ctx)
	if err == nil {
		var claims *jwt.RegisteredClaims
		if claims, err = v.Verify(tok); err == nil {
			return context.WithValue(ctx, claimsKey{}, claims), nil
		}
	}
	if cfg.rejected != nil {
		cfg.rejected(ctx, method, err)
	}
	msg := "missing bearer token"
	if r := jwtkeys.RejectReasonOf(err); r != "" {
		msg = "token rejected: " + string(r)
	}
	return nil, status.Error(codes.Unauthenticated, msg)
}

var errNoToken = fmt.Errorf("jwtgrpc: no %q bearer token in the request metadata", MetadataKey)

func bearer(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(MetadataKey)
	if len(vals) != 1 {
		return "", errNoToken
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", errNoToken
	}
	return strings.TrimSpace(tok), nil
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }
