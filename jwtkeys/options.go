package jwtkeys

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
)

// Defaults of a KeySet.
const (
	// DefaultMaxTokenTTL is the longest lifetime Issue and Sign accept.
	DefaultMaxTokenTTL = time.Hour
	// DefaultClockSkew is the leeway granted on exp, nbf and iat.
	DefaultClockSkew = time.Minute
	// DefaultPropagation is added to the grace period by default: how long a
	// rotation may take to reach every replica that signs (a kubelet-projected
	// Secret volume takes up to its sync period plus cache TTL, about a minute or
	// two) and every verifier's cached JWKS.
	DefaultPropagation = 5 * time.Minute
	// DefaultJWKSMaxAge is the Cache-Control max-age of the JWKS handler.
	DefaultJWKSMaxAge = time.Minute
	// DefaultComponent is the component label of metrics and log lines.
	DefaultComponent = "jwt_signing"
)

// Option configures a [KeySet]. Besides the options of this package, a KeySet
// accepts hotcert's reload options (hotcert.ReloadOption: hotcert.WithComponent,
// WithLogger, WithLogAttrs, WithSettle, WithPollInterval, WithInitialWait), with the
// same meaning as for a hotcert.Reloader; its settle and poll defaults are
// hotcert.DefaultSettle and hotcert.DefaultPollInterval.
type Option interface {
	// ApplyReload sets the option on t, a KeySet's configuration. Its exported
	// name and public parameter are what let hotcert.ReloadOption be an Option too.
	ApplyReload(t reload.Target)
}

type optionFunc func(*config)

// ApplyReload implements [Option]. A target that is not a KeySet's configuration
// (another reloader's) is left alone.
func (f optionFunc) ApplyReload(t reload.Target) {
	if c, ok := t.(*config); ok {
		f(c)
	}
}

type config struct {
	grace      time.Duration // 0: maxTTL + skew + DefaultPropagation
	maxTTL     time.Duration
	skew       time.Duration
	issuer     string
	audience   string
	now        func() time.Time
	reload     reload.Settings // component, logger, settle, poll, initial wait
	observer   Observer
	jwksMaxAge time.Duration
}

func (c *config) ReloadSettings() *reload.Settings { return &c.reload }

func defaultConfig() config {
	return config{
		maxTTL: DefaultMaxTokenTTL,
		skew:   DefaultClockSkew,
		now:    time.Now,
		reload: reload.Settings{
			Component: DefaultComponent,
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			Settle:    hotcert.DefaultSettle,
			Poll:      hotcert.DefaultPollInterval,
		},
		observer:   nopObserver{},
		jwksMaxAge: DefaultJWKSMaxAge,
	}
}

func (c *config) check() error {
	switch {
	case c.maxTTL <= 0:
		return fmt.Errorf("jwtkeys: the maximum token lifetime must be positive, got %s", c.maxTTL)
	case c.skew < 0:
		return fmt.Errorf("jwtkeys: the clock skew must not be negative, got %s", c.skew)
	case c.grace == 0:
		c.grace = c.maxTTL + c.skew + DefaultPropagation
	case c.grace < c.maxTTL+c.skew:
		return fmt.Errorf("jwtkeys: grace period %s is shorter than the maximum token lifetime %s plus the clock skew %s: "+
			"tokens signed just before a rotation would be rejected before they expire", c.grace, c.maxTTL, c.skew)
	}
	if c.jwksMaxAge < 0 {
		return errors.New("jwtkeys: the JWKS max-age must not be negative")
	}
	return nil
}

// WithGracePeriod sets how long a key keeps verifying after a rotation retired it.
// It must be at least the maximum token lifetime plus the clock skew; size it as
// described in docs/jwt-keys.md. Default: maximum token lifetime + clock skew +
// [DefaultPropagation].
func WithGracePeriod(d time.Duration) Option { return optionFunc(func(c *config) { c.grace = d }) }

// WithMaxTokenTTL sets the longest lifetime a token may be issued with (default
// [DefaultMaxTokenTTL]). Issue and Sign refuse longer ones, so the grace period
// provably covers every token in flight.
func WithMaxTokenTTL(d time.Duration) Option { return optionFunc(func(c *config) { c.maxTTL = d }) }

// WithClockSkew sets the leeway granted when checking exp, nbf and iat (default
// [DefaultClockSkew]).
func WithClockSkew(d time.Duration) Option { return optionFunc(func(c *config) { c.skew = d }) }

// WithIssuer sets the iss claim of issued tokens and requires it on verified ones.
func WithIssuer(iss string) Option { return optionFunc(func(c *config) { c.issuer = iss }) }

// WithAudience sets the aud claim of issued tokens and requires verified ones to
// name it.
func WithAudience(aud string) Option { return optionFunc(func(c *config) { c.audience = aud }) }

// WithClock sets the clock tokens and grace periods are measured with (default
// time.Now). Tests use it to cross a grace period without sleeping.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now != nil {
			c.now = now
		}
	})
}

// WithObserver reports loads, failures and verifications to o (see package
// jwtmetrics).
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) {
		if o != nil {
			c.observer = o
		}
	})
}

// WithJWKSMaxAge sets the Cache-Control max-age of [KeySet.JWKSHandler] (default
// [DefaultJWKSMaxAge]). It adds to how long a rotation takes to reach verifiers in
// other processes: publish a new key at least this long before it signs.
func WithJWKSMaxAge(d time.Duration) Option { return optionFunc(func(c *config) { c.jwksMaxAge = d }) }

type nopObserver struct{}

func (nopObserver) ObserveLoad(string, SetInfo, bool)  {}
func (nopObserver) ObserveFailure(string, error)       {}
func (nopObserver) ObserveKeys(string, SetInfo)        {}
func (nopObserver) ObserveVerify(string, RejectReason) {}
