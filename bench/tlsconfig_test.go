//go:build unix

package bench_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/handshakebench"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

func tlsServer(cfg *tls.Config) func(net.Conn) error {
	return func(c net.Conn) error { return tls.Server(c, cfg).Handshake() }
}

func tlsClient(cfg *tls.Config) func(net.Conn) error {
	return func(c net.Conn) error { return tls.Client(c, cfg).Handshake() }
}

// reloader is a started-less hotcert Reloader reading the PKI's files, as a
// program would use it.
func reloader(b *testing.B, opts ...file.Option) *hotcert.Reloader {
	src, err := file.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	r, err := hotcert.New(context.Background(), src)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

// BenchmarkTLSConfigMTLS: full mutual-TLS handshakes (TLS 1.3, ECDSA P-256, no
// resumption), both ends in this process, static tls.Config against hotcert and
// against other reloaders, rows interleaved. certwatcher reloads only the server
// certificate (compare it with hotcert-server-only); go-spiffe verifies SPIFFE IDs
// in VerifyPeerCertificate.
func BenchmarkTLSConfigMTLS(b *testing.B) {
	p := newPKI(b)
	base := &tls.Config{MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true}

	staticSrv := base.Clone()
	staticSrv.Certificates = []tls.Certificate{p.srv}
	staticSrv.ClientAuth = tls.RequireAndVerifyClientCert
	staticSrv.ClientCAs = p.pool()
	staticCli := base.Clone()
	staticCli.Certificates = []tls.Certificate{p.cli}
	staticCli.RootCAs = p.pool()
	staticCli.ServerName = "localhost"

	srvR := reloader(b, file.WithKeyPair(p.path("tls.crt"), p.path("tls.key")), file.WithCA(p.path("ca.crt")))
	cliR := reloader(b, file.WithKeyPair(p.path("client.crt"), p.path("client.key")), file.WithCA(p.path("ca.crt")))
	hotSrv := tlsconfig.MTLSServerConfig(srvR, tlsconfig.WithBase(base))
	hotCli := tlsconfig.ClientConfig(cliR, "localhost", tlsconfig.WithBase(base))
	dialer := tlsconfig.NewDialer(cliR, tlsconfig.WithBase(base))
	perDial := func(c net.Conn) error {
		cfg, err := dialer.Config(context.Background())
		if err != nil {
			return err
		}
		cfg = cfg.Clone()
		cfg.ServerName = "localhost"
		return tls.Client(c, cfg).Handshake()
	}

	cw, err := certwatcher.New(p.path("tls.crt"), p.path("tls.key"))
	if err != nil {
		b.Fatal(err)
	}
	cwSrv := base.Clone()
	cwSrv.GetCertificate = cw.GetCertificate
	cwSrv.ClientAuth = tls.RequireAndVerifyClientCert
	cwSrv.ClientCAs = p.pool()

	spSrv := spiffetls.MTLSServerConfig(p.srvSVID, p.bundle, spiffetls.AuthorizeAny())
	spSrv.MinVersion, spSrv.SessionTicketsDisabled = tls.VersionTLS13, true
	spCli := spiffetls.MTLSClientConfig(p.cliSVID, p.bundle, spiffetls.AuthorizeAny())
	spCli.MinVersion = tls.VersionTLS13

	handshakebench.Interleave(b, []handshakebench.Handshaker{
		{Name: "static", Server: tlsServer(staticSrv), Client: tlsClient(staticCli)},
		{Name: "hotcert", Server: tlsServer(hotSrv), Client: tlsClient(hotCli)},
		{Name: "hotcert-dialer", Server: tlsServer(hotSrv), Client: perDial},
		{Name: "hotcert-server-only", Server: tlsServer(hotSrv), Client: tlsClient(staticCli)},
		{Name: "certwatcher-server-only", Server: tlsServer(cwSrv), Client: tlsClient(staticCli)},
		{Name: "go-spiffe", Server: tlsServer(spSrv), Client: tlsClient(spCli)},
	})
}
