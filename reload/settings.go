package reload

import (
	"log/slog"
	"time"
)

// Settings are what every reloader built on this package (hotcert.Reloader,
// jwtkeys.KeySet) is configured with alike, by the options they all accept
// (hotcert.ReloadOption).
type Settings struct {
	// Component names what the content is for: the component label of metrics
	// and the component attribute of log lines.
	Component string
	// Logger receives one line per real change and one per distinct failure.
	Logger *slog.Logger
	// ComponentKey names the log attribute that carries Component on every line
	// (see Attrs; "" is "component").
	ComponentKey string
	// LogAttrs are added to every log line.
	LogAttrs []any
	// Settle is how long failing content is treated as "maybe mid-write".
	Settle time.Duration
	// Poll is the interval of re-reads without notifications (0: none).
	Poll time.Duration
	// InitialWait is how long the first load is retried.
	InitialWait time.Duration
}

// ReloadSettings returns s: a *Settings is itself a [Target], for a reloader whose
// configuration is nothing more.
func (s *Settings) ReloadSettings() *Settings { return s }

// Attrs returns the attributes every log line of a reloader starts with: the
// component under its one key, then LogAttrs. Failure, load and watch lines all
// use it, so a search on one key finds every line of a component.
func (s *Settings) Attrs() []any {
	key := s.ComponentKey
	if key == "" {
		key = defaultComponentKey
	}
	return append([]any{key, s.Component}, s.LogAttrs...)
}

// defaultComponentKey is the log attribute that names the component when
// Settings.ComponentKey is empty: the default component label of the metrics.
const defaultComponentKey = "component"

// Target is a reloader's configuration as the shared options see it: they set its
// Settings. An option of one reloader reaches the rest of its own configuration
// type through a type assertion, and does nothing to another reloader's, so one
// option interface serves both kinds of options.
type Target interface{ ReloadSettings() *Settings }
