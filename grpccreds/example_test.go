package grpccreds_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
)

func exampleMaterial(leaf *hotcerttest.Leaf, ca *hotcerttest.CA) *hotcert.Material {
	c := hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: ca.CertPEM}}
	if leaf != nil {
		c.Cert = hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM}
		c.Key = hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM}
	}
	m, err := hotcert.Validate(c)
	if err != nil {
		panic(err)
	}
	return m
}

// A mutual-TLS gRPC server and client whose certificates and bundles follow their
// providers (in a program: Reloaders reading mounted Secrets). A new connection made
// after the server's certificate rotated gets the new certificate.
func Example() {
	ca := hotcerttest.MustNewCA()
	first, renewed := ca.MustIssue(), ca.MustIssue()
	serverMaterial := hotcert.NewStore(exampleMaterial(first, ca))
	agentMaterial := hotcert.NewStore(exampleMaterial(ca.MustIssue(hotcerttest.WithCommonName("agent")), ca))

	srv := grpc.NewServer(grpc.Creds(grpccreds.NewMTLSServer(serverMaterial)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	check := func() bool {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(grpccreds.NewClient(agentMaterial)))
		if err != nil {
			panic(err)
		}
		defer cc.Close()
		var p peer.Peer
		resp, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		if err != nil {
			panic(err)
		}
		fmt.Println(resp.GetStatus())
		return serialOf(&p).Cmp(renewed.Cert.SerialNumber) == 0
	}
	fmt.Println("renewed certificate served:", check())
	serverMaterial.Set(exampleMaterial(renewed, ca))
	fmt.Println("renewed certificate served:", check())
	// Output:
	// SERVING
	// renewed certificate served: false
	// SERVING
	// renewed certificate served: true
}
