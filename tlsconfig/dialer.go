package tlsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/hotcert/hotcert"
)

// Dialer opens client connections with a fresh, standard-library-verified config
// built from the Material current at each dial: RootCAs is the current CA bundle,
// the client certificate the current one, and crypto/tls verifies the server (name
// or IP SAN, validity, serverAuth usage, chain, name constraints) exactly as a
// static config would. Use it where you control the dial; the grpccreds and httptls
// clients are built on it.
//
// A Dialer is safe for concurrent use.
type Dialer struct {
	identity hotcert.Provider
	trust    hotcert.Provider // nil: the identity provider's bundle
	settings settings
	tmpl     *tls.Config
	cache    configCache
}

// NewDialer returns a Dialer whose certificate comes from p and whose trust comes
// from p or from the provider given with WithTrust. The material may hold only a CA
// bundle (no client certificate is then sent). A base config (WithBase) supplies
// everything else: versions, session cache, NextProtos, key log, and RootCAs for as
// long as the provider holds no bundle.
func NewDialer(p hotcert.Provider, opts ...Option) *Dialer {
	d := &Dialer{identity: p, settings: newSettings(opts)}
	d.trust = d.settings.trust
	d.tmpl = d.settings.template()
	if d.settings.serverName != "" {
		d.tmpl.ServerName = d.settings.serverName
	}
	d.cache.build = d.build
	return d
}

// Config re-reads the sources given with WithReloadOnDial, then returns the client
// config for the current Material. The config is built once per change of Material
// and shared: do not modify it (Clone it first). Its ServerName is the one of
// WithServerName or the base config, and otherwise empty: set it on a clone, or let
// tls.Dial, tls.Dialer or credentials.NewTLS set it from the address.
func (d *Dialer) Config(ctx context.Context) (*tls.Config, error) {
	d.settings.reload(ctx)
	id, tr := current(d.identity, d.trust)
	return d.cache.get(id, tr)
}

// ServerName returns the name the Dialer expects servers to present, set with
// WithServerName or in the base config; empty means the dialed host.
func (d *Dialer) ServerName() string { return d.tmpl.ServerName }

// DialContext connects to addr and performs the TLS handshake with the config of
// the current Material, expecting the server's certificate to match the host of
// addr (or the WithServerName name). It has the signature of
// http.Transport.DialTLSContext.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	cfg, err := d.Config(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("tlsconfig: dial %s: %w", addr, err)
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	td := tls.Dialer{Config: cfg}
	return td.DialContext(ctx, network, addr)
}

// Notify calls fn, on a goroutine of its own, whenever a change of Material alters
// what new connections of this Dialer would present or trust (the client
// certificate or the CA bundle), for example to close idle connections. Providers
// that do not implement hotcert.Notifier are not followed. The returned function
// stops the notifications.
func (d *Dialer) Notify(fn func()) (stop func()) {
	var stops []func()
	if n, ok := d.identity.(hotcert.Notifier); ok {
		stops = append(stops, n.Subscribe(func(prev, next *hotcert.Material) {
			if changedForClient(prev, next, d.trust == nil) {
				fn()
			}
		}))
	}
	if n, ok := d.trust.(hotcert.Notifier); ok {
		stops = append(stops, n.Subscribe(func(prev, next *hotcert.Material) {
			if trustChanged(prev, next) {
				fn()
			}
		}))
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

func changedForClient(prev, next *hotcert.Material, withTrust bool) bool {
	if prev == nil || next == nil {
		return prev != next
	}
	return !prev.SameIdentity(next) || withTrust && !prev.SameTrust(next)
}

func trustChanged(prev, next *hotcert.Material) bool {
	if prev == nil || next == nil {
		return prev != next
	}
	return !prev.SameTrust(next)
}

// build prepares the config for one pair of Materials; it runs once per change.
func (d *Dialer) build(id, tr *hotcert.Material) (*tls.Config, error) {
	cfg := d.tmpl.Clone()
	if tr.HasTrust() {
		cfg.RootCAs = tr.TrustPool()
	}
	if cfg.RootCAs == nil && !cfg.InsecureSkipVerify {
		// crypto/tls would verify against the system roots: fail closed instead.
		return nil, errors.New("tlsconfig: no CA bundle to verify servers against (" + describe(tr) + ")")
	}
	if id.HasIdentity() {
		cfg.Certificates = []tls.Certificate{*id.Certificate()}
		cfg.GetClientCertificate = nil
	}
	if !cfg.InsecureSkipVerify {
		rc := &resumptionCheck{roots: cfg.RootCAs, usages: serverAuth, time: cfg.Time, deny: d.settings.deny, next: cfg.VerifyConnection}
		cfg.VerifyConnection = rc.verify
	}
	return cfg, nil
}
