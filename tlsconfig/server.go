package tlsconfig

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/hotcert/hotcert"
)

// ServerConfig returns a server config that presents the current certificate of p
// on every new handshake, whether the client sent SNI or dialed an IP address. It
// requests no client certificate unless the base config (WithBase) says otherwise;
// see MTLSServerConfig.
//
// The returned config has empty Certificates and a GetConfigForClient that returns
// the prepared config for the current Material; do not replace that hook. Pass the
// config through credentials.NewTLS for gRPC (grpc-go >= 1.68 keeps "h2" on the
// configs GetConfigForClient returns), or use the grpccreds package.
func ServerConfig(p hotcert.Provider, opts ...Option) *tls.Config {
	s := newSettings(opts)
	cfg := s.template()
	hookServer(cfg, p, &s)
	return cfg
}

// MTLSServerConfig is ServerConfig with ClientAuth set to
// tls.RequireAndVerifyClientCert: every client must present a certificate that
// chains to the current CA bundle (of p, or of the provider given with WithTrust)
// and carries the clientAuth extended key usage.
func MTLSServerConfig(p hotcert.Provider, opts ...Option) *tls.Config {
	s := newSettings(opts)
	cfg := s.template()
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	hookServer(cfg, p, &s)
	return cfg
}

// HookServerConfig makes base a hot-reloading server config, as ServerConfig does,
// keeping its other fields. It sets GetConfigForClient (replacing any previous one)
// and clears Certificates and GetCertificate. base.ClientAuth decides whether client
// certificates are requested; when they are, the current CA bundle becomes
// ClientCAs (base.ClientCAs is used only while the provider holds no bundle).
// base.VerifyConnection, if set, still runs after hotcert's checks.
//
// base is snapshotted: set its fields before calling HookServerConfig, and do not
// modify it once it is in use.
func HookServerConfig(base *tls.Config, p hotcert.Provider, opts ...Option) {
	s := newSettings(opts)
	s.applyNextProtos(base)
	hookServer(base, p, &s)
}

func hookServer(cfg *tls.Config, p hotcert.Provider, s *settings) {
	tmpl := cfg.Clone()
	resetServerHooks(tmpl)
	srv := newServer(p, s.trust, tmpl, cfg)
	srv.deny = s.deny
	resetServerHooks(cfg)
	cfg.GetConfigForClient = srv.configForClient
}

// resetServerHooks clears every field through which crypto/tls would find a
// certificate other than the one hotcert prepares (as go-spiffe's resetAuthFields
// does): the hooked config keeps only GetConfigForClient, and the template of the
// prepared configs none of them.
func resetServerHooks(cfg *tls.Config) {
	cfg.Certificates = nil
	cfg.GetCertificate = nil
	cfg.GetConfigForClient = nil
}

type server struct {
	identity hotcert.Provider
	trust    hotcert.Provider // nil: the identity provider's bundle
	tmpl     *tls.Config
	outer    *tls.Config // the hooked config, whose session ticket keys seal tickets
	deny     DenyList    // nil: no deny list
	cache    configCache
}

// newServer serves p's identity, trusting trust's bundle (nil: p's own), with
// configs prepared from tmpl, which it only reads, for the hooked config outer.
func newServer(p, trust hotcert.Provider, tmpl, outer *tls.Config) *server {
	srv := &server{identity: p, trust: trust, tmpl: tmpl, outer: outer}
	srv.cache.build = srv.build
	return srv
}

func (s *server) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	id, tr := current(s.identity, s.trust)
	return s.cache.get(id, tr)
}

// build prepares the config for one pair of Materials; it runs once per change.
func (s *server) build(id, tr *hotcert.Material) (*tls.Config, error) {
	if !id.HasIdentity() {
		return nil, fmt.Errorf("tlsconfig: %s holds no certificate and key to serve", describe(id))
	}
	cfg := s.tmpl.Clone()
	cfg.Certificates = []tls.Certificate{*id.Certificate()}
	bindSessionsToName(cfg, s.outer)
	if cfg.ClientAuth != tls.NoClientCert && tr.HasTrust() {
		cfg.ClientCAs = tr.TrustPool()
	}
	if cfg.ClientAuth >= tls.VerifyClientCertIfGiven {
		if cfg.ClientCAs == nil {
			// crypto/tls would verify against the system roots: fail closed instead.
			return nil, errors.New("tlsconfig: client certificates must be verified but there is no CA bundle (" + describe(tr) + ")")
		}
		rc := &resumptionCheck{roots: cfg.ClientCAs, usages: clientAuth, time: cfg.Time, deny: s.deny, next: cfg.VerifyConnection}
		cfg.VerifyConnection = rc.verify
	}
	return cfg, nil
}

func describe(m *hotcert.Material) string {
	switch {
	case m == nil:
		return "the provider (no material yet)"
	case m.Source() != "":
		return m.Source()
	default:
		return "the material"
	}
}
