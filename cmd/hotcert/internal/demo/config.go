package demo

import (
	"io"
	"log/slog"
	"time"
)

// Break names an invariant-breaking variant of the story, to show that the demo
// notices when a rotation goes wrong.
type Break string

// Variants of the story.
const (
	// BreakNone plays the safe story.
	BreakNone Break = ""
	// BreakOneStepCA replaces the three-step CA rotation by the unsafe one-step swap
	// the runbook warns against: agents that reconnect in between fail verification,
	// unless the trust guards are on (Config.TrustGuards).
	BreakOneStepCA Break = "one-step-ca"
)

// Config configures a demo run.
type Config struct {
	// Out is the directory for the PKI, the kubelet-style volumes, the log and the
	// timeline picture. It must exist.
	Out string
	// Agents is the number of agents (default 50).
	Agents int
	// Replicas is the number of control-plane replicas (default 2).
	Replicas int
	// Short shortens waits and heartbeats, for CI.
	Short bool
	// Break plays a variant that must fail (unless TrustGuards saves it).
	Break Break
	// TrustGuards turns on the trust guards of the replicas and the agents
	// (controlplane.Config.TrustGuard, agent.Config.TrustGuard): the one-step CA swap
	// of BreakOneStepCA then completes without a failed handshake. hotcert demo turns
	// them on unless --trust-guards=false.
	TrustGuards bool
	// Stdout receives progress and the summary.
	Stdout io.Writer
	// Terminal makes progress a live status line instead of plain lines.
	Terminal bool
	// PhaseTimeout bounds the wait for agents to settle in each phase (default 60s).
	PhaseTimeout time.Duration
	// NewLogger returns the logger of the replicas and agents, writing demo.log to w
	// (default: text at info level). The CLI passes --log-format and --log-level.
	NewLogger func(w io.Writer) (*slog.Logger, error)
}

func (c *Config) defaults() {
	if c.Agents <= 0 {
		c.Agents = 50
	}
	if c.Replicas <= 0 {
		c.Replicas = 2
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.PhaseTimeout <= 0 {
		c.PhaseTimeout = 60 * time.Second
	}
	if c.NewLogger == nil {
		c.NewLogger = func(w io.Writer) (*slog.Logger, error) { return slog.New(slog.NewTextHandler(w, nil)), nil }
	}
}
