package hotcert

import (
	"io"
	"log/slog"
	"time"
)

// Defaults of a [Reloader].
const (
	// DefaultSettle is how long content that fails validation is treated as "maybe
	// mid-write" (certificate written, key not yet) before it counts as a failure.
	DefaultSettle = time.Second
	// DefaultPollInterval is how often the source is re-read even without a change
	// notification, as a fallback for filesystems and watches that miss events.
	DefaultPollInterval = 30 * time.Second
)

// Option configures a [Reloader].
type Option interface{ applyReloader(*reloaderConfig) }

type optionFunc func(*reloaderConfig)

func (f optionFunc) applyReloader(c *reloaderConfig) { f(c) }

type reloaderConfig struct {
	component    string
	logger       *slog.Logger
	logAttrs     []any
	msgLoaded    string
	msgReloaded  string
	msgFailed    string
	observer     Observer
	settle       time.Duration
	poll         time.Duration
	initialWait  time.Duration
	validateOpts []ValidateOption
}

func defaultReloaderConfig() reloaderConfig {
	return reloaderConfig{
		component:   "default",
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		msgLoaded:   "TLS certificate loaded",
		msgReloaded: "TLS certificate reloaded",
		msgFailed:   "TLS certificate reload failed",
		observer:    nopObserver{},
		settle:      DefaultSettle,
		poll:        DefaultPollInterval,
	}
}

// WithComponent names what the material is for (e.g. "agent_grpc"): the component
// label of metrics and the component/listener attribute of log lines.
func WithComponent(name string) Option {
	return optionFunc(func(c *reloaderConfig) { c.component = name })
}

// WithLogger sets the logger (default: discard). The Reloader logs one line per real
// change and one per distinct failure, never key material.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *reloaderConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithLogAttrs adds attributes to every log line (e.g. "file", path).
func WithLogAttrs(args ...any) Option {
	return optionFunc(func(c *reloaderConfig) { c.logAttrs = append(c.logAttrs, args...) })
}

// WithLogMessages replaces the messages of the first-load, reload and failure lines
// (defaults "TLS certificate loaded", "TLS certificate reloaded", "TLS certificate
// reload failed"). Empty strings keep the default.
func WithLogMessages(loaded, reloaded, failed string) Option {
	return optionFunc(func(c *reloaderConfig) {
		for dst, v := range map[*string]string{&c.msgLoaded: loaded, &c.msgReloaded: reloaded, &c.msgFailed: failed} {
			if v != "" {
				*dst = v
			}
		}
	})
}

// WithObserver reports loads and failures to o (see the metrics package).
func WithObserver(o Observer) Option {
	return optionFunc(func(c *reloaderConfig) {
		if o != nil {
			c.observer = o
		}
	})
}

// WithSettle sets how long failing content is treated as "maybe mid-write" before it
// is logged and counted as a failure (default [DefaultSettle]; 0 reports at once).
// Content that validates is served immediately, never delayed by this window.
func WithSettle(d time.Duration) Option {
	return optionFunc(func(c *reloaderConfig) { c.settle = d })
}

// WithPollInterval sets how often the source is re-read without a change
// notification (default [DefaultPollInterval]; 0 disables polling).
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(c *reloaderConfig) { c.poll = d })
}

// WithInitialWait makes [New] retry the first load for up to d (for a Secret that
// cert-manager has not issued yet) instead of failing at once.
func WithInitialWait(d time.Duration) Option {
	return optionFunc(func(c *reloaderConfig) { c.initialWait = d })
}

// WithValidation adds policies to the validation of every load (see [Validate]),
// including the clock validity windows are checked against ([WithClock]).
func WithValidation(opts ...ValidateOption) Option {
	return optionFunc(func(c *reloaderConfig) { c.validateOpts = append(c.validateOpts, opts...) })
}
