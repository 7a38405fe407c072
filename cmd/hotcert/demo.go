package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/demo"
	"github.com/hotcert/hotcert/cmd/internal/cli"
)

func newDemoCommand(g *globals) *cobra.Command {
	var (
		out      string
		agents   int
		replicas int
		short    bool
		brk      string
		timeout  time.Duration
		guards   bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Rotate certificates and token keys under 2 control-plane replicas and 50 agents, and prove nobody noticed",
		Long: `demo builds a local PKI and agent-token signing keys, starts control-plane replicas
and agents of the reference system in this process, and plays a server-certificate
renewal, the three-step CA rotation with a union bundle, a botched rotation (a key
that does not match) that must be refused while service goes on, the three-step
rotation of the key agent tokens are signed with, and a graceful reconnect that
drains agents onto a renewed certificate over a window. Files change the way the
kubelet changes a mounted Secret. Agents authenticate with bearer tokens throughout.

Replicas move agents onto a new server certificate with the graceful reconnect
(each stream ends cleanly at a random time within the drain window). A change of
the agents' CA bundle takes effect on their next connection, so those phases force
a reconnect (the demo drops every connection, as a control-plane restart would);
the summary, the table and the timeline say which phase did which.

Invariants, checked in every phase: no failed TLS handshake, no stream drop the demo
did not cause, no agent token refused; the botched certificate is never served and
is logged and counted once; after the signing-key rotation every agent holds a token
of the new key and tokens of the removed key are refused. It prints a summary per
phase, writes timeline.svg (which certificate each agent was served and which CAs it
trusts, over time) and demo.log (in the --log-format and --log-level given), and
exits non-zero naming any broken invariant. Interrupted (Ctrl-C), it reports only
the phases that finished.

The replicas and agents run with their trust guards on (--trust-guard, as hotcert
server and hotcert agent name it): with --break one-step-ca the unsafe one-step CA
swap then completes without a failed handshake, the guards saving it;
--break one-step-ca --trust-guard=false shows it failing.

The table says per phase how long agents were not connected (p50/max, from the end
of a stream to the next one). The demo runs every agent and replica on this
machine's CPUs; when a phase was bound by them (a goroutine ready to run waited 50ms
or more for a CPU in one probe of a hundred), the table and a note say so: those
times are then mostly the machine's, not hotcert's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := g.logger(); err != nil { // a bad --log-format is a startup error
				return err
			}
			// Flags first: a refused command leaves no directory behind.
			if agents < 1 || replicas < 1 {
				return fmt.Errorf("--agents and --replicas must be at least 1")
			}
			b := demo.Break(brk)
			if b != demo.BreakNone && b != demo.BreakOneStepCA {
				return fmt.Errorf("--break %q: the only variant is %q", brk, demo.BreakOneStepCA)
			}
			if out == "" {
				dir, err := os.MkdirTemp("", "hotcert-demo-")
				if err != nil {
					return err
				}
				out = dir
			} else if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			_, err = demo.Run(cmd.Context(), demo.Config{
				Out: abs, Agents: agents, Replicas: replicas, Short: short, Break: b, TrustGuards: guards,
				Stdout: g.stdout, Terminal: isTerminal(g.stdout), PhaseTimeout: timeout,
				NewLogger: g.log.Logger, // demo.log in --log-format and --log-level
			})
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory for the PKI, volumes, log and timeline.svg (default: a new temporary directory)")
	f.IntVar(&agents, "agents", 50, "number of agents")
	f.IntVar(&replicas, "replicas", 2, "number of control-plane replicas")
	f.BoolVar(&short, "short", false, "shorter heartbeats, pauses and drain window, for CI")
	f.StringVar(&brk, "break", "", `play an unsafe variant: "one-step-ca" (fails with --trust-guard=false)`)
	f.BoolVar(&guards, "trust-guard", true, "run replicas and agents with their trust guards on (hotcert server/agent --trust-guard)")
	cli.Alias(f, "trust-guard", "trust-guards")
	f.DurationVar(&timeout, "phase-timeout", 60*time.Second, "how long a phase may wait for agents to settle")
	return cmd
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
