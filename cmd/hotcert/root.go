package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// globals are the flags every subcommand shares.
type globals struct {
	stdout, stderr io.Writer
	logFormat      string
	logLevel       string
}

// logger returns the process logger, writing to stderr in the chosen format.
func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", g.logFormat)
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "hotcert",
		Short: "TLS certificate rotation without restarts",
		Long: `hotcert makes TLS certificate rotation a non-event: servers and agents reload
validated certificates and CA bundles in place, and a rollout controller rolls the
workloads that cannot.`,
		SilenceUsage:  true, // a bad input gets a one-line reason, not the usage text
		SilenceErrors: true, // main prints the error once
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(subcommands(g)...)
	return root
}

// subcommands lists every subcommand; each lives in a file of its own.
func subcommands(g *globals) []*cobra.Command {
	return []*cobra.Command{
		newDemoCommand(g),
		newControllerCommand(g),
		newServerCommand(g),
		newAgentCommand(g),
		newInspectCommand(g),
		newCheckCommand(g),
		newTokenCommand(g),
	}
}
