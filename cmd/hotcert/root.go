package main

import (
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert/cmd/internal/cli"
)

// globals are the flags every subcommand shares.
type globals struct {
	stdout, stderr io.Writer
	log            cli.LogFlags
}

// logger returns the process logger, writing to stderr in the chosen format.
func (g *globals) logger() (*slog.Logger, error) { return g.log.Logger(g.stderr) }

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "hotcert",
		Short: "TLS certificate rotation without restarts",
		Long: `hotcert makes TLS certificate rotation a non-event: servers and agents reload
validated certificates and CA bundles in place, and a rollout controller rolls the
workloads that cannot (the hotcert-controller binary).`,
		SilenceUsage:  true, // a bad input gets a one-line reason, not the usage text
		SilenceErrors: true, // main prints the error once
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	g.log.AddFlags(root.PersistentFlags())
	root.AddCommand(subcommands(g)...)
	cli.SetVersion(root)   // --version on every command
	cli.SuggestFlags(root) // "unknown flag: --cert-fiel (did you mean --cert-file?)"
	cli.WarningsTo(root, stderr)
	cli.GroupsNeedACommand(root) // "hotcert pki isue": a one-line error, not the help and exit 0
	jsonFailures(root, stdout)
	return root
}

// subcommands lists every subcommand; each lives in a file of its own.
func subcommands(g *globals) []*cobra.Command {
	return []*cobra.Command{
		newDemoCommand(g),
		newServerCommand(g),
		newAgentCommand(g),
		newInspectCommand(g),
		newRotationCommand(g),
		newCheckCommand(g),
		newTokenCommand(g),
		newPKICommand(g),
		newMirrorCommand(g),
		newProxyCommand(g),
	}
}
