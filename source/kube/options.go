package kube

import (
	"io"
	"log/slog"
	"time"
)

// DefaultResync is the informer resync period: a safety net only, since the Reloader
// ignores content it already serves.
const DefaultResync = 10 * time.Minute

// Option configures a [Source].
type Option interface{ apply(*Source) }

type optionFunc func(*Source)

func (f optionFunc) apply(s *Source) { f(s) }

// WithCertKey sets the data key holding the certificate chain (default "tls.crt").
func WithCertKey(k string) Option { return optionFunc(func(s *Source) { s.certKey = k }) }

// WithPrivateKeyKey sets the data key holding the private key (default "tls.key").
func WithPrivateKeyKey(k string) Option { return optionFunc(func(s *Source) { s.keyKey = k }) }

// WithCAKey sets the data key holding the CA bundle (default "ca.crt"). For a Secret
// the key is optional: when it is absent the content has no bundle. Pass "" to ignore
// a Secret's bundle altogether (cert-manager advises not to use a serving Secret's
// ca.crt as trust).
func WithCAKey(k string) Option { return optionFunc(func(s *Source) { s.caKey = k }) }

// WithResync sets the informer resync period (default [DefaultResync]; 0 disables).
func WithResync(d time.Duration) Option { return optionFunc(func(s *Source) { s.resync = d }) }

// WithLogger sets the logger for watch problems (default: discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(s *Source) {
		if l != nil {
			s.logger = l
		}
	})
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
