package reload

import (
	"log/slog"
	"time"
)

// Settings are what every hotcert reloader (hotcert.Reloader, jwtkeys.KeySet) is
// configured with alike, by the options they both accept (hotcert.ReloadOption).
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

// Target is a reloader's configuration as the shared options see it. Options of
// one reloader only reach their own configuration type through it (a type
// assertion), so one option interface serves both kinds of options.
type Target interface{ ReloadSettings() *Settings }
