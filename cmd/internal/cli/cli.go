// Package cli holds what hotcert's binaries share on their command line: the
// logging flags and the version they report.
package cli

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
)

// version is set at link time (-ldflags "-X github.com/hotcert/hotcert/cmd/internal/cli.version=v1.2.3");
// without it, Version reports the module version Go recorded in the binary.
var version = ""

// Version returns the version the binary reports on --version.
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// LogFlags are the logging flags every command takes.
type LogFlags struct {
	Format string
	Level  string
}

// AddFlags registers --log-format and --log-level on fs.
func (f *LogFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Format, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.Level, "log-level", "info", "log level: debug, info, warn or error")
}

// Logger returns a logger writing to w in the chosen format and level.
func (f *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.Level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(f.Format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", f.Format)
	}
}
