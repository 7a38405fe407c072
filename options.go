package hotcert

import (
	"io"
	"log/slog"
	"time"

	"github.com/hotcert/hotcert/reload"
)

// Defaults of a [Reloader] (and of a jwtkeys.KeySet, which shares them).
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

// ReloadOption is an [Option] that every hotcert reloader accepts with one meaning:
// a [Reloader] and a jwtkeys.KeySet (whose Option it also is). [WithComponent],
// [WithLogger], [WithLogAttrs], [WithSettle], [WithPollInterval] and
// [WithInitialWait] are ReloadOptions, so one list of them configures the TLS and
// the JWT reloaders of a process alike.
type ReloadOption interface {
	Option
	// ApplyReload sets the option on a reloader's shared settings (t's
	// reload.Settings). Reloaders built on package reload call it, hotcert's and
	// your own alike.
	ApplyReload(t reload.Target)
}

type optionFunc func(*reloaderConfig)

func (f optionFunc) applyReloader(c *reloaderConfig) { f(c) }

// reloadOption is a ReloadOption: it sets the shared settings of any reloader.
type reloadOption func(*reload.Settings)

func (f reloadOption) ApplyReload(t reload.Target) { f(t.ReloadSettings()) }

func (f reloadOption) applyReloader(c *reloaderConfig) { f(&c.Settings) }

type reloaderConfig struct {
	reload.Settings // component, logger, log attributes, settle, poll, initial wait
	msgLoaded       string
	msgReloaded     string
	msgFailed       string
	observer        Observer
	validateOpts    []ValidateOption
}

func defaultReloaderConfig() reloaderConfig {
	return reloaderConfig{
		Settings: reload.Settings{
			Component: "default",
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			Settle:    DefaultSettle,
			Poll:      DefaultPollInterval,
		},
		msgLoaded:   msgCertLoaded,
		msgReloaded: msgCertReloaded,
		msgFailed:   "TLS certificate reload failed",
		observer:    nopObserver{},
	}
}

// The default load lines, and those of a reloader that holds only a CA bundle
// (no leaf): it did not load a certificate to serve, and its line says so.
const (
	msgCertLoaded     = "TLS certificate loaded"
	msgCertReloaded   = "TLS certificate reloaded"
	msgBundleLoaded   = "TLS CA bundle loaded"
	msgBundleReloaded = "TLS CA bundle reloaded"
)

// loadMessage is the message of the line that logs m (the first load when
// initial): the one WithLogMessages chose, else the default for a certificate,
// or for a CA bundle when m holds trust and no leaf.
func (c *reloaderConfig) loadMessage(m *Material, initial bool) string {
	msg, bundle := c.msgReloaded, msgBundleReloaded
	if initial {
		msg, bundle = c.msgLoaded, msgBundleLoaded
	}
	if (msg == msgCertLoaded || msg == msgCertReloaded) && !m.HasIdentity() && m.HasTrust() {
		return bundle
	}
	return msg
}

// WithComponent names what the material is for (e.g. "agent_grpc"): the component
// label of metrics and the component attribute of log lines. An empty name keeps
// the default ("default" for a Reloader, "jwt_signing" for a KeySet).
func WithComponent(name string) ReloadOption {
	return reloadOption(func(s *reload.Settings) {
		if name != "" {
			s.Component = name
		}
	})
}

// WithComponentLabel names the log attribute that carries the component (see
// [WithComponent]) on every line of a reloader: loads, reloads, failures and watch
// problems alike (default "component"). Give it the name of the metrics' component
// label (metrics.WithComponentLabel), so that one name finds a component in logs
// and metrics: "listener" gives listener=agent_grpc on every line and
// hotcert_tls_reload_failures_total{listener="agent_grpc"}. An empty name keeps
// the default.
func WithComponentLabel(name string) ReloadOption {
	return reloadOption(func(s *reload.Settings) {
		if name != "" {
			s.ComponentKey = name
		}
	})
}

// WithLogger sets the logger (default: discard; nil keeps it). A reloader logs one
// line per real change and one per distinct failure, never key material.
func WithLogger(l *slog.Logger) ReloadOption {
	return reloadOption(func(s *reload.Settings) {
		if l != nil {
			s.Logger = l
		}
	})
}

// WithLogAttrs adds attributes to every log line (e.g. "file", path).
func WithLogAttrs(args ...any) ReloadOption {
	return reloadOption(func(s *reload.Settings) { s.LogAttrs = append(s.LogAttrs, args...) })
}

// WithLogMessages replaces the messages of the first-load, reload and failure lines
// (defaults "TLS certificate loaded", "TLS certificate reloaded", "TLS certificate
// reload failed"; a reloader of a CA bundle alone logs "TLS CA bundle loaded" and
// "TLS CA bundle reloaded"). Empty strings keep the default.
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
// is logged and counted as a failure (default [DefaultSettle]; 0, or a negative
// duration, reports at once). Content that validates is served immediately, never
// delayed by this window.
func WithSettle(d time.Duration) ReloadOption {
	return reloadOption(func(s *reload.Settings) { s.Settle = max(d, 0) })
}

// WithPollInterval sets how often the source is re-read without a change
// notification (default [DefaultPollInterval]; 0, or a negative duration, disables
// polling).
func WithPollInterval(d time.Duration) ReloadOption {
	return reloadOption(func(s *reload.Settings) { s.Poll = max(d, 0) })
}

// WithInitialWait makes the first load retry for up to d (for a Secret that
// cert-manager has not issued yet) instead of failing at once.
func WithInitialWait(d time.Duration) ReloadOption {
	return reloadOption(func(s *reload.Settings) { s.InitialWait = max(d, 0) })
}

// WithValidation adds policies to the validation of every load (see [Validate]),
// including the clock validity windows are checked against ([WithClock]).
func WithValidation(opts ...ValidateOption) Option {
	return optionFunc(func(c *reloaderConfig) { c.validateOpts = append(c.validateOpts, opts...) })
}
