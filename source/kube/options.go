package kube

import (
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// DefaultResync is the informer resync period: a safety net only, since the Reloader
// ignores content it already serves.
const DefaultResync = 10 * time.Minute

// DefaultRefusalGrace is how long reads the API server refuses (401, 403) or does
// not answer keep returning the last answer before the failure is reported (see
// [WithRefusalGrace]): a restarting API server refuses reads for a moment while its
// authorizer warms up, and is unreachable while it restarts. It is the reloader's
// default poll interval, so a real revocation is reported no later than a poll
// without a watch would have seen it.
const DefaultRefusalGrace = 30 * time.Second

// Option configures a [Source] or a [Keys] reader. The key-name options
// ([WithCertKey], [WithPrivateKeyKey], [WithCAKey]) say what a Source reads; a Keys
// reader is given its keys and takes only [WithResync], [WithLogger] and
// [WithRefusalGrace].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	certKey, keyKey, caKey string
	resync                 time.Duration
	logger                 *slog.Logger // nil: the reloader's
	grace                  time.Duration
	clock                  clock.WithDelayedExecution
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

// WithLogger sets the logger that says when the watch is lost and when it is back
// (default: the logger of the hotcert Reloader or jwtkeys KeySet the source runs
// under, with its component attribute, handed by SetDefaultLogger). Whether or not
// a logger is set, a watch that cannot be restored is reported to the reloader as a
// read failure (see [Keys]).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithRefusalGrace sets how long a read the API server refuses (401 Unauthorized,
// 403 Forbidden) or does not answer (unreachable, overloaded, failing) returns the
// last answer instead of the failure, measured from the first read that failed so
// — the first refusal for a refusal, the first unanswered read for an unanswered
// one — and reset by any answer (default [DefaultRefusalGrace]; 0 reports every
// failure at once). Only once it has lasted that long is the failure returned, and
// reported by the reloader once. A source that never read its object (before the
// first load) has no answer to return and fails at once.
func WithRefusalGrace(d time.Duration) Option {
	return optionFunc(func(c *config) { c.grace = max(d, 0) })
}

func defaults() config {
	return config{resync: DefaultResync, grace: DefaultRefusalGrace, clock: clock.RealClock{}}
}
