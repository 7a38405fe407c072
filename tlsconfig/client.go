package tlsconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"

	"github.com/hotcert/hotcert"
)

// ClientConfig returns one client config whose certificate and trust follow p, for
// code that takes a single *tls.Config (tls.Dial, database drivers, HTTP proxies).
// The client certificate is chosen per handshake (GetClientCertificate), and the
// server certificate is verified per handshake (VerifyConnection) against the CA
// bundle current at that moment, with crypto/tls's semantics: name, validity, the
// serverAuth usage, chain and name constraints. Resumed sessions are re-verified
// too. Prefer [Dialer] where you control the dial: it lets crypto/tls verify.
//
// serverName is the name (DNS name or IP address) the server certificate must
// match. Leave it empty to take it from the config's ServerName, or else from the
// SNI the handshake sent (tls.Dial and net/http fill ServerName from the address);
// an IP address is never sent as SNI, so dialing an IP with no name given fails
// verification rather than skipping the name check.
//
// Because InsecureSkipVerify is set to hand verification to VerifyConnection,
// ConnectionState.VerifiedChains stays empty and a VerifyPeerCertificate of the base
// config receives no verified chains.
func ClientConfig(p hotcert.Provider, serverName string, opts ...Option) *tls.Config {
	s := newSettings(opts)
	cfg := s.template()
	hookClient(cfg, p, serverName, &s)
	return cfg
}

// HookClientConfig makes base a hot-reloading client config, as ClientConfig does,
// keeping its other fields: it sets InsecureSkipVerify, GetClientCertificate and
// VerifyConnection (which runs base's previous VerifyConnection after its own
// checks), and clears Certificates. base.RootCAs is used only while the provider
// holds no CA bundle. Set base's fields before calling it.
func HookClientConfig(base *tls.Config, p hotcert.Provider, serverName string, opts ...Option) {
	s := newSettings(opts)
	s.applyNextProtos(base)
	hookClient(base, p, serverName, &s)
}

func hookClient(cfg *tls.Config, p hotcert.Provider, serverName string, s *settings) {
	if serverName == "" {
		serverName = s.serverName
	}
	if serverName == "" {
		serverName = cfg.ServerName
	}
	c := &client{
		identity:   p,
		trust:      s.trust,
		serverName: serverName,
		fallback:   cfg.RootCAs,
		time:       cfg.Time,
		next:       cfg.VerifyConnection,
		settings:   s,
	}
	cfg.ServerName = serverName
	cfg.InsecureSkipVerify = true // verification happens in VerifyConnection
	cfg.Certificates = nil
	cfg.GetClientCertificate = c.clientCertificate
	cfg.VerifyConnection = c.verifyConnection
}

type client struct {
	identity   hotcert.Provider
	trust      hotcert.Provider // nil: the identity provider's bundle
	serverName string
	fallback   *x509.CertPool
	time       func() time.Time
	next       func(tls.ConnectionState) error
	settings   *settings
}

// clientCertificate behaves like crypto/tls with Certificates set to the current
// certificate: it is sent when the server's request allows it, otherwise no
// certificate is sent.
func (c *client) clientCertificate(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
	id := c.identity.Current()
	if !id.HasIdentity() {
		return new(tls.Certificate), nil
	}
	cert := id.Certificate()
	if cri.SupportsCertificate(cert) != nil {
		return new(tls.Certificate), nil
	}
	return cert, nil
}

// verifyConnection runs on every handshake, full or resumed (after the server's
// certificate, before the client sends its own).
func (c *client) verifyConnection(cs tls.ConnectionState) error {
	c.settings.reload(context.Background())
	name := c.serverName
	if name == "" {
		name = cs.ServerName
	}
	if name == "" {
		return errors.New("tlsconfig: no server name to verify the server certificate against " +
			"(an IP address is never sent as SNI: pass the expected name or IP to ClientConfig)")
	}
	roots := c.fallback
	if _, tr := current(c.identity, c.trust); tr.HasTrust() {
		roots = tr.TrustPool()
	}
	chains, err := verifyChain(cs.PeerCertificates, roots, name, serverAuth, now(c.time))
	if err != nil {
		return err
	}
	if err := checkDenied(c.settings.deny, chains, cs.DidResume); err != nil {
		return err
	}
	if c.next != nil {
		return c.next(cs)
	}
	return nil
}
