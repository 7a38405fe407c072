package tlsconfig

import (
	"crypto/tls"
	"fmt"

	"github.com/hotcert/hotcert"
)

// IdentitiesServerConfig returns a server config that serves several identities,
// each from its own provider (typically one [*hotcert.Reloader] per certificate, so
// each is reloaded, logged and counted under its own component): per host name, or
// an RSA and an ECDSA certificate side by side. On every new handshake it chooses
// among the providers' current certificates exactly as crypto/tls chooses among
// Config.Certificates: the first, in the order of ids, that the ClientHello
// supports ([tls.ClientHelloInfo.SupportsCertificate]: the SNI name, then the
// signature algorithms, curves and cipher suites the client offers), or else the
// first. A client that dials an IP address sends no SNI and gets the first
// certificate its algorithms support.
//
// Everything else is as for [ServerConfig], per chosen identity: the config of each
// identity is prepared once per change of its Material, its trust bundle (its own
// Material's, or that of WithTrust) becomes ClientCAs when the base config asks for
// client certificates (set ClientAuth with WithBase; verification fails closed
// without a bundle), and a resumed session is re-verified against the bundle of the
// identity it resumes under, so a client of one identity's CA cannot resume into
// another identity that does not trust that CA. A provider that holds no
// certificate and key is passed over; a handshake fails only when none holds one.
//
// ids is copied; its order is the order of preference.
func IdentitiesServerConfig(ids []hotcert.Provider, opts ...Option) *tls.Config {
	s := newSettings(opts)
	cfg := s.template()
	hookIdentities(cfg, ids, &s)
	return cfg
}

// HookIdentitiesServerConfig makes base serve several identities, as
// IdentitiesServerConfig does, keeping its other fields. Like [HookServerConfig], it
// sets GetConfigForClient (replacing any previous one) and clears Certificates and
// GetCertificate; base.ClientAuth decides whether client certificates are requested.
// base is snapshotted: set its fields before calling, and do not modify it once it
// is in use.
func HookIdentitiesServerConfig(base *tls.Config, ids []hotcert.Provider, opts ...Option) {
	s := newSettings(opts)
	s.applyNextProtos(base)
	hookIdentities(base, ids, &s)
}

func hookIdentities(cfg *tls.Config, ids []hotcert.Provider, s *settings) {
	tmpl := cfg.Clone()
	resetServerHooks(tmpl)
	m := &identities{servers: make([]*server, 0, len(ids))}
	for _, p := range ids {
		if p == nil {
			continue
		}
		// One server per identity: its own prepared-config cache and its own
		// build (certificate, ClientCAs, resumption check), shared with
		// ServerConfig. The template is only read, so they share it.
		srv := newServer(p, s.trust, tmpl, cfg)
		srv.deny = s.deny // WithDenyList holds for every identity
		m.servers = append(m.servers, srv)
	}
	resetServerHooks(cfg)
	cfg.GetConfigForClient = m.configForClient
}

// identities chooses, per ClientHello, the identity whose prepared config serves the
// handshake.
type identities struct {
	servers []*server
}

// configForClient mirrors crypto/tls's Config.getCertificate over the current
// certificates (tried in order with SupportsCertificate, the first as the
// fallback), then returns the chosen identity's prepared config, which holds that
// one certificate. The Material read for the choice is the Material served: a
// rotation that races the handshake is seen by the next one.
func (m *identities) configForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	var (
		fallback               *server
		fallbackID, fallbackTr *hotcert.Material
	)
	for _, srv := range m.servers {
		id, tr := current(srv.identity, srv.trust)
		if !id.HasIdentity() {
			continue
		}
		if hello.SupportsCertificate(id.Certificate()) == nil {
			return srv.cache.get(id, tr)
		}
		if fallback == nil {
			fallback, fallbackID, fallbackTr = srv, id, tr
		}
	}
	if fallback == nil {
		return nil, fmt.Errorf("tlsconfig: none of the %d identities holds a certificate and key to serve", len(m.servers))
	}
	return fallback.cache.get(fallbackID, fallbackTr)
}
