//go:build unix

package grpccreds_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/handshakebench"
	"github.com/hotcert/hotcert/tlsconfig"
)

func credsServer(c credentials.TransportCredentials) func(net.Conn) error {
	return func(conn net.Conn) error {
		_, _, err := c.ServerHandshake(conn)
		return err
	}
}

func credsClient(c credentials.TransportCredentials) func(net.Conn) error {
	return func(conn net.Conn) error {
		_, _, err := c.ClientHandshake(context.Background(), "localhost:443", conn)
		return err
	}
}

// BenchmarkMTLSHandshake compares the gRPC transport credentials' full mutual-TLS
// handshakes (TLS 1.3, ECDSA P-256, no resumption) with credentials.NewTLS on
// static configs, both ends in this process. Run it with -benchtime=5000x for
// ratios to about 0.5%.
func BenchmarkMTLSHandshake(b *testing.B) {
	ca := hotcerttest.MustNewCA()
	srvLeaf, cliLeaf := ca.MustIssue(), ca.MustIssue(hotcerttest.WithCommonName("agent"))
	base := &tls.Config{MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true}

	staticSrv := base.Clone()
	staticSrv.Certificates = []tls.Certificate{srvLeaf.TLSCertificate()}
	staticSrv.ClientAuth = tls.RequireAndVerifyClientCert
	staticSrv.ClientCAs = hotcerttest.Pool(ca)
	staticCli := base.Clone()
	staticCli.Certificates = []tls.Certificate{cliLeaf.TLSCertificate()}
	staticCli.RootCAs = hotcerttest.Pool(ca)

	srv := grpccreds.NewMTLSServer(hotcert.NewStore(hotcertMaterial(b, srvLeaf, ca)), tlsconfig.WithBase(base))
	cli := grpccreds.NewClient(hotcert.NewStore(hotcertMaterial(b, cliLeaf, ca)), tlsconfig.WithBase(base))
	staticSrvCreds, staticCliCreds := credentials.NewTLS(staticSrv), credentials.NewTLS(staticCli)

	handshakebench.Interleave(b, []handshakebench.Handshaker{
		{Name: "credentials.NewTLS", Server: credsServer(staticSrvCreds), Client: credsClient(staticCliCreds)},
		{Name: "grpccreds", Server: credsServer(srv), Client: credsClient(cli)},
		{Name: "grpccreds-server-only", Server: credsServer(srv), Client: credsClient(staticCliCreds)},
		{Name: "grpccreds-client-only", Server: credsServer(staticSrvCreds), Client: credsClient(cli)},
	})
}
