package kube

import (
	"io"
	"log/slog"
	"time"
)

// DefaultResync is the informer resync period: a safety net only, since the Reloader
// ignores content it already serves.
const DefaultResync = 10 * time.Minute

// Option configures a [Source] or a [Keys] reader. The key-name options
// ([WithCertKey], [WithPrivateKeyKey], [WithCAKey]) say what a Source reads; a Keys
// reader is given its keys and takes only [WithResync] and [WithLogger].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	certKey, keyKey, caKey string
	resync                 time.Duration
	logger                 *slog.Logger
}

// WithCertKey sets the data key holding the certificate chain (default "tls.crt").
func WithCertKey(k string) Option { return optionFunc(func(c *config) { c.certKey = k }) }

// WithPrivateKeyKey sets the data key holding the private key (default "tls.key").
func WithPrivateKeyKey(k string) Option { return optionFunc(func(c *config) { c.keyKey = k }) }

// WithCAKey sets the data key holding the CA bundle (default "ca.crt"). For a Secret
// the key is optional: when it is absent or empty the content has no bundle (and
// hotcert.WithRequireTrust refuses it). Pass "" to ignore a Secret's bundle
// altogether (cert-manager advises not to use a serving Secret's ca.crt as trust).
func WithCAKey(k string) Option { return optionFunc(func(c *config) { c.caKey = k }) }

// WithResync sets the informer resync period (default [DefaultResync]; 0 disables).
func WithResync(d time.Duration) Option { return optionFunc(func(c *config) { c.resync = d }) }

// WithLogger sets the logger for watch problems (default: discard). Whether or not
// a logger is set, a watch that cannot be restored is reported to the reloader as a
// read failure (see [Keys]).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

func defaults() config {
	return config{resync: DefaultResync, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}
