package jwtgrpc_test

import (
	"context"
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtfile"
	"github.com/hotcert/hotcert/jwtkeys/jwtgrpc"
)

// A control plane verifies agent tokens on every stream it accepts.
func ExampleStreamServerInterceptor() {
	ctx := context.Background()
	src, _ := jwtfile.New(jwtfile.Dir("/etc/agent-token-keys"))
	ks, err := jwtkeys.New(ctx, src, jwtkeys.WithAudience("control-plane"))
	if err != nil {
		return // missing or invalid keys: a startup error
	}
	go ks.Start(ctx)

	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{ /* e.g. from package tlsconfig */ })),
		grpc.ChainStreamInterceptor(jwtgrpc.StreamServerInterceptor(ks)),
		grpc.ChainUnaryInterceptor(jwtgrpc.UnaryServerInterceptor(ks)),
	)
	_ = srv // register services; in a handler, jwtgrpc.ClaimsFromContext(ctx) names the agent
}

// An agent presents the token file it was given (re-read on every new stream).
func ExampleNewPerRPCCredentials() {
	conn, err := grpc.NewClient("cp.example:9091",
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ /* e.g. from package grpccreds */ })),
		grpc.WithPerRPCCredentials(jwtgrpc.NewPerRPCCredentials(jwtkeys.NewFileTokenSource("/var/run/agent/token"))),
	)
	if err != nil {
		return
	}
	defer conn.Close()
}
