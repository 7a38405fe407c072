//go:build unix

package bench_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/tls/certprovider"
	"google.golang.org/grpc/credentials/tls/certprovider/pemfile"
	"google.golang.org/grpc/security/advancedtls"

	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/internal/handshakebench"
	"github.com/hotcert/hotcert/source/file"
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

// BenchmarkGRPCCredsMTLS: the gRPC transport credentials' full mutual-TLS
// handshakes (TLS 1.3, ECDSA P-256, no resumption), credentials.NewTLS on static
// configs against hotcert's grpccreds, grpc-go's advancedtls with the pemfile
// provider, and go-spiffe's configs through credentials.NewTLS, rows interleaved.
func BenchmarkGRPCCredsMTLS(b *testing.B) {
	p := newPKI(b)
	base := &tls.Config{MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true}

	staticSrv := base.Clone()
	staticSrv.Certificates = []tls.Certificate{p.srv}
	staticSrv.ClientAuth = tls.RequireAndVerifyClientCert
	staticSrv.ClientCAs = p.pool()
	staticCli := base.Clone()
	staticCli.Certificates = []tls.Certificate{p.cli}
	staticCli.RootCAs = p.pool()

	srvR := reloader(b, file.WithKeyPair(p.path("tls.crt"), p.path("tls.key")), file.WithCA(p.path("ca.crt")))
	cliR := reloader(b, file.WithKeyPair(p.path("client.crt"), p.path("client.key")), file.WithCA(p.path("ca.crt")))

	idSrv, rootSrv := pemProvider(b, pemfile.Options{CertFile: p.path("tls.crt"), KeyFile: p.path("tls.key")}), pemProvider(b, pemfile.Options{RootFile: p.path("ca.crt")})
	idCli, rootCli := pemProvider(b, pemfile.Options{CertFile: p.path("client.crt"), KeyFile: p.path("client.key")}), pemProvider(b, pemfile.Options{RootFile: p.path("ca.crt")})
	atSrv, err := advancedtls.NewServerCreds(&advancedtls.Options{
		IdentityOptions:   advancedtls.IdentityCertificateOptions{IdentityProvider: idSrv},
		RootOptions:       advancedtls.RootCertificateOptions{RootProvider: rootSrv},
		RequireClientCert: true,
		VerificationType:  advancedtls.CertVerification,
		MinTLSVersion:     tls.VersionTLS13,
		MaxTLSVersion:     tls.VersionTLS13,
	})
	if err != nil {
		b.Fatal(err)
	}
	atCli, err := advancedtls.NewClientCreds(&advancedtls.Options{
		IdentityOptions:  advancedtls.IdentityCertificateOptions{IdentityProvider: idCli},
		RootOptions:      advancedtls.RootCertificateOptions{RootProvider: rootCli},
		VerificationType: advancedtls.CertAndHostVerification,
		MinTLSVersion:    tls.VersionTLS13,
		MaxTLSVersion:    tls.VersionTLS13,
	})
	if err != nil {
		b.Fatal(err)
	}
	spSrv := spiffetls.MTLSServerConfig(p.srvSVID, p.bundle, spiffetls.AuthorizeAny())
	spSrv.MinVersion, spSrv.SessionTicketsDisabled = tls.VersionTLS13, true
	spCli := spiffetls.MTLSClientConfig(p.cliSVID, p.bundle, spiffetls.AuthorizeAny())
	spCli.MinVersion = tls.VersionTLS13

	staticSrvCreds, staticCliCreds := credentials.NewTLS(staticSrv), credentials.NewTLS(staticCli)
	handshakebench.Interleave(b, []handshakebench.Handshaker{
		{Name: "credentials.NewTLS", Server: credsServer(staticSrvCreds), Client: credsClient(staticCliCreds)},
		{Name: "grpccreds", Server: credsServer(grpccreds.NewMTLSServer(srvR, tlsconfig.WithBase(base))), Client: credsClient(grpccreds.NewClient(cliR, tlsconfig.WithBase(base)))},
		{Name: "advancedtls-pemfile", Server: credsServer(atSrv), Client: credsClient(atCli)},
		{Name: "go-spiffe", Server: credsServer(credentials.NewTLS(spSrv)), Client: credsClient(credentials.NewTLS(spCli))},
	})
}

func pemProvider(b *testing.B, o pemfile.Options) certprovider.Provider {
	o.RefreshDuration = time.Hour
	pr, err := pemfile.NewProvider(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pr.Close)
	return pr
}
