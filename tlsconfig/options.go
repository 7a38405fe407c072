package tlsconfig

import (
	"context"
	"crypto/tls"
	"slices"

	"github.com/hotcert/hotcert"
)

// Option configures the configs and dialers of this package.
type Option interface{ apply(*settings) }

type optionFunc func(*settings)

func (f optionFunc) apply(s *settings) { f(s) }

// Reloadable is a source of Material that can be re-read synchronously, such as a
// [*hotcert.Reloader].
type Reloadable interface {
	// Reload re-reads the source and publishes the result when it is good; on error
	// the last good Material stays current.
	Reload(ctx context.Context) error
}

type settings struct {
	base       *tls.Config
	trust      hotcert.Provider
	serverName string
	nextProtos []string
	reloaders  []Reloadable
	deny       DenyList
}

func newSettings(opts []Option) settings {
	var s settings
	for _, o := range opts {
		if o != nil {
			o.apply(&s)
		}
	}
	return s
}

// template returns a private copy of the base config (or a new one) with the
// options that shape it applied.
func (s *settings) template() *tls.Config {
	cfg := &tls.Config{}
	if s.base != nil {
		cfg = s.base.Clone()
	}
	s.applyNextProtos(cfg)
	return cfg
}

func (s *settings) applyNextProtos(cfg *tls.Config) {
	for _, p := range s.nextProtos {
		if !slices.Contains(cfg.NextProtos, p) {
			cfg.NextProtos = append(slices.Clip(cfg.NextProtos), p)
		}
	}
}

// current returns the current identity Material and the current trust Material:
// from trust when set (WithTrust), otherwise the identity Material itself.
func current(identity, trust hotcert.Provider) (id, tr *hotcert.Material) {
	id = identity.Current()
	if trust == nil {
		return id, id
	}
	return id, trust.Current()
}

// WithBase uses a clone of base as the template of the configs built: its versions,
// cipher suites, ClientAuth, session cache, Time, VerifyConnection and so on are
// kept, while certificates and trust come from the provider. base is cloned when the
// option is applied; later changes to it have no effect. Hook functions ignore this
// option (they modify their own argument).
func WithBase(base *tls.Config) Option {
	var c *tls.Config
	if base != nil {
		c = base.Clone()
	}
	return optionFunc(func(s *settings) { s.base = c })
}

// WithTrust takes the trust bundle (RootCAs of a client, ClientCAs of a server) from
// p instead of from the provider of the certificate: for example a server
// certificate from a Secret and a client CA bundle from a ConfigMap.
func WithTrust(p hotcert.Provider) Option {
	return optionFunc(func(s *settings) { s.trust = p })
}

// WithServerName sets the name a client expects in the server's certificate (DNS
// name or IP address) and sends as SNI, instead of the host it dials.
func WithServerName(name string) Option {
	return optionFunc(func(s *settings) { s.serverName = name })
}

// WithNextProtos adds ALPN protocols to the template's NextProtos, keeping those
// already there and their order: "h2" for gRPC, "h2" and "http/1.1" for HTTP.
func WithNextProtos(protos ...string) Option {
	return optionFunc(func(s *settings) { s.nextProtos = append(s.nextProtos, protos...) })
}

// WithReloadOnDial makes a client re-read r before every connection it opens (its
// first and every reconnect), even when no file event arrived: an agent that
// re-reads its CA bundle on every dial. A failing re-read never fails the dial: the
// last good Material stays in use, and a [*hotcert.Reloader] logs and counts each
// distinct bad content once (set its message with hotcert.WithLogMessages, e.g.
// "agent TLS CA bundle reload failed"). Usually r is also the provider, or the
// trust provider set with WithTrust.
func WithReloadOnDial(r Reloadable) Option {
	return optionFunc(func(s *settings) {
		if r != nil {
			s.reloaders = append(s.reloaders, r)
		}
	})
}

func (s *settings) reload(ctx context.Context) {
	for _, r := range s.reloaders {
		_ = r.Reload(ctx) // the reloader keeps the last good material and reports the failure
	}
}
