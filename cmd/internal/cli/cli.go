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
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, bi)
}

// versionOf is the version a binary reports: linked, the version set at link
// time (make release, make image); else the main module's version Go
// recorded (vX.Y.Z for `go install …/cmd/hotcert@vX.Y.Z`); else "dev",
// followed by the commit Go stamped when it did (a build in a checkout:
// "dev+0123456789ab", "dev+0123456789ab.dirty" with uncommitted changes).
func versionOf(linked string, bi *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = ".dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	return "dev+" + rev + dirty
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
