package revocation

import (
	"io"
	"log/slog"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
)

// DefaultComponent is the component (metrics label, log attribute) of a Reloader
// given none.
const DefaultComponent = "deny_list"

// StalePolicy says what a List does once a CRL it holds passes its NextUpdate
// without a newer one replacing it.
type StalePolicy int

const (
	// KeepEnforcing (the default) keeps refusing every certificate the stale CRL
	// lists and lets the others in: a publisher that stopped never re-admits a
	// revoked certificate, and never locks the fleet out. The staleness is logged
	// once, shown in Info.Stale and counted.
	KeepEnforcing StalePolicy = iota
	// RefuseAll refuses every peer whose chain goes through the stale CRL's issuer
	// (fail closed, as an X.509 relying party strictly should), and the live cut
	// ends their connections, until a fresh CRL is loaded.
	RefuseAll
)

// String returns the policy's flag value: "keep-enforcing" or "refuse-all".
func (p StalePolicy) String() string {
	if p == RefuseAll {
		return "refuse-all"
	}
	return "keep-enforcing"
}

// Option configures a [Reloader]. Besides the options of this package, a Reloader
// accepts hotcert's reload options (hotcert.WithComponent, WithLogger,
// WithComponentLabel, WithLogAttrs, WithSettle, WithPollInterval, WithInitialWait).
type Option interface {
	// ApplyReload sets the option on t, a Reloader's configuration.
	ApplyReload(t reload.Target)
}

type optionFunc func(*config)

// ApplyReload implements [Option]; another reloader's configuration is left alone.
func (f optionFunc) ApplyReload(t reload.Target) {
	if c, ok := t.(*config); ok {
		f(c)
	}
}

type config struct {
	reload   reload.Settings
	observer Observer
	policy   StalePolicy
	clock    hotcert.Clock
}

func (c *config) ReloadSettings() *reload.Settings { return &c.reload }

func defaultConfig() config {
	return config{
		reload: reload.Settings{
			Component: DefaultComponent,
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			Settle:    hotcert.DefaultSettle,
			Poll:      hotcert.DefaultPollInterval,
		},
		observer: nopObserver{},
		clock:    wallClock{},
	}
}

// WithStalePolicy sets what a stale CRL does (default [KeepEnforcing]).
func WithStalePolicy(p StalePolicy) Option { return optionFunc(func(c *config) { c.policy = p }) }

// WithClock sets the clock CRL dates are judged by and the staleness timer runs
// on (default the wall clock); hotcerttest.FakeClock is one.
func WithClock(clk hotcert.Clock) Option {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

// WithObserver reports loads, failures and stale CRLs to o (metrics.NewDenyList).
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) {
		if o != nil {
			c.observer = o
		}
	})
}

// Observer receives the outcome of every load, once per distinct change or bad
// content, and every CRL that goes stale while in use.
type Observer interface {
	ObserveLoad(component string, l *List, initial bool)
	ObserveFailure(component string, err error)
	ObserveStale(component string, crl CRLInfo)
}

type nopObserver struct{}

func (nopObserver) ObserveLoad(string, *List, bool) {}
func (nopObserver) ObserveFailure(string, error)    {}
func (nopObserver) ObserveStale(string, CRLInfo)    {}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
