package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/internal/cli"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/metrics"
)

type agentFlags struct {
	cfg           agent.Config
	tokenFile     string
	metricsAddr   string
	metricsPrefix string
	metricsLabel  string
	revokedCAs    []string
	deny          denyListFlags
}

func newAgentCommand(g *globals) *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent --server HOST:PORT [--server-name NAME] --ca-file F [--cert-file F --key-file F] [--metrics-bind-address ADDR]",
		Short: "Run the reference agent: one long-lived gRPC stream to the control plane",
		Long: `Run hotcert's reference agent. It keeps one bidirectional gRPC stream open
to the control plane (register, heartbeat, receive work) and reconnects with
jittered backoff when it drops.

--deny-list and --crl-file (CRLs signed by a CA of --ca-file) revoke control plane
certificates: a handshake with a revoked one is refused, resumptions included, and a
list that revokes the certificate the open connection was made with closes it. The
list is read like ca.crt and its version is in the agent's reports
(docs/revocation.md).

ca.crt is re-read on every connection, the first and every reconnect, and may hold
several CAs: a three-step CA rotation with a union bundle never fails a handshake.
A bundle that does not load keeps the last good one and logs "agent TLS CA bundle
reload failed" with the file path, once per bad content. A missing or invalid bundle
at startup is a startup error. A handshake that fails verification fails the attempt
at once, with the x509 reason (unknown_authority, hostname, expired, ...) in the log
and in hotcert_agent_tls_handshake_failures_total{reason}.

With --token-file the agent authenticates with a bearer JWT: the file holds its
bootstrap token (re-read on every connection, like a projected service-account
token). Once connected it presents the fresh tokens the control plane hands it over
the stream, and falls back on the file when the held token expired or was refused.
A refused token fails the attempt with reason "unauthenticated" and backs off.`,
		Example: `  hotcert agent --server cp-0.cp.dexaflow.svc:9091 --server-name cp.dexaflow.svc --ca-file /etc/agent-ca/ca.crt
  hotcert agent --server cp:9091 --ca-file /etc/agent-ca/ca.crt --token-file /var/run/secrets/agent/token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd.Context(), g, f) },
	}
	fl := cmd.Flags()
	c := &f.cfg
	fl.StringVar(&c.Server, "server", "", "control plane address host:port (required)")
	fl.StringVar(&c.ServerName, "server-name", "", "name the server certificate must match, sent as SNI (default: the host of --server)")
	fl.StringVar(&c.CAFile, "ca-file", "", "CA bundle the server certificate is verified against, re-read on every connection (required)")
	fl.StringVar(&c.CertFile, "cert-file", "", "client certificate chain for servers that require mTLS")
	fl.StringVar(&c.KeyFile, "key-file", "", "client private key")
	fl.StringVar(&c.ID, "id", "", "agent id (default: host name and a random suffix); with --token-file, the subject of its tokens")
	fl.StringVar(&f.tokenFile, "token-file", "", "bootstrap bearer token (JWT) for a control plane that requires one, re-read on every connection")
	fl.BoolVar(&c.Watch, "watch", true, "also follow the files between connections, so metrics and logs show a change before the next reconnect")
	fl.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", 10*time.Second, "heartbeat period")
	fl.DurationVar(&c.HeartbeatTimeout, "heartbeat-timeout", 0, "drop and reopen a stream that received nothing for this long while the heartbeats sent meanwhile went unanswered (default: three heartbeat periods)")
	fl.DurationVar(&c.ConnectTimeout, "connect-timeout", 10*time.Second, "bound on opening a stream (dial, handshake, register)")
	fl.DurationVar(&c.MinBackoff, "min-backoff", time.Second, "first delay after a failed connection attempt (doubles, jittered)")
	fl.DurationVar(&c.MaxBackoff, "max-backoff", 30*time.Second, "longest delay between failed connection attempts")
	fl.DurationVar(&c.ReconnectOnCertChange, "reconnect-on-cert-change", defaultDrainWindow, "with --cert-file: after the client certificate rotates, reconnect at a random time within this window so the server sees it (0: on the next reconnect)")
	fl.DurationVar(&c.ReconnectBeforeExpiry, "reconnect-before-expiry", drain.DefaultExpiryMargin, "reconnect this long before the server certificate the connection verified, or the client certificate it presented, expires, at a random time within --reconnect-on-cert-change before that (0: a connection may outlive them)")
	fl.DurationVar(&c.ReconnectJitter, "reconnect-jitter", time.Second, "random delay, up to this, before reconnecting after a drop")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", "", "serve /metrics and /healthz on this address (off when empty)")
	fl.BoolVar(&c.TrustGuard, "trust-guard", false, "keep trusting the CA that issued the leaf the control plane serves after the bundle drops it, until the control plane serves a leaf from a CA the bundle keeps (at most --trust-guard-max; off by default: it trusts a CA the bundle no longer holds)")
	fl.DurationVar(&c.TrustGuardMax, "trust-guard-max", agent.DefaultTrustGuardMax, "with --trust-guard: longest time a CA removed from the bundle stays trusted")
	f.deny.register(fl, "refuse, and disconnect from, a control plane whose certificate")
	fl.StringSliceVar(&f.revokedCAs, "revoked-ca", nil, "with --trust-guard: SHA-256 fingerprint of a CA never kept after removal (repeatable, or comma-separated)")
	fl.StringVar(&f.metricsPrefix, "metrics-prefix", "hotcert", "prefix of the TLS reload metrics")
	fl.StringVar(&f.metricsLabel, "metrics-component-label", "component", "label carrying the component in the TLS reload metrics")
	cli.Alias(fl, "cert-file", "tls-cert")
	cli.Alias(fl, "key-file", "tls-key")
	cli.Alias(fl, "metrics-bind-address", "metrics-listen")
	return cmd
}

func runAgent(ctx context.Context, g *globals, f *agentFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	switch {
	case f.cfg.Server == "":
		return errors.New("--server is required: the control plane's address, host:port")
	case f.cfg.CAFile == "":
		return errors.New("--ca-file is required: the CA bundle the server certificate is verified against")
	case (f.cfg.CertFile == "") != (f.cfg.KeyFile == ""):
		return errors.New("--cert-file and --key-file go together: the client certificate and its key")
	}
	if err := agent.CheckServerAddress(f.cfg.Server); err != nil {
		return fmt.Errorf("--server %s", err)
	}
	cfg := f.cfg
	cfg.Logger = log
	for _, s := range f.revokedCAs {
		fp, err := hotcert.ParseFingerprint(s)
		if err != nil {
			return fmt.Errorf("--revoked-ca %w", err)
		}
		cfg.RevokedCAs = append(cfg.RevokedCAs, fp)
	}
	if cfg.DenyList, cfg.StaleCRLPolicy, err = f.deny.source(log); err != nil {
		return err
	}
	if f.tokenFile != "" {
		cfg.Token = jwtkeys.NewFileTokenSource(f.tokenFile)
		if _, err := cfg.Token.Token(ctx); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return fmt.Errorf("--token-file %s: %w", pe.Path, pe.Err)
			}
			return fmt.Errorf("--token-file %s: %w", f.tokenFile, err)
		}
	}
	cfg.MetricsOptions = []metrics.Option{metrics.WithPrefix(f.metricsPrefix), metrics.WithComponentLabel(f.metricsLabel)}
	cfg.ReloaderOptions = append(cfg.ReloaderOptions, hotcert.WithComponentLabel(f.metricsLabel)) // one key in logs and metrics
	reg := newProcessRegistry()
	cfg.Registerer = reg
	a, err := agent.New(cfg)
	if err != nil {
		return inUserTerms(err, fileFlags("--ca-file", cfg.CAFile, "--cert-file", cfg.CertFile, "--key-file", cfg.KeyFile, "--deny-list", f.deny.list, "--crl-file", f.deny.crl))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := func() {}
	if f.metricsAddr != "" {
		if wait, err = serveObservability(ctx, f.metricsAddr, reg, a.HealthHandler(), log); err != nil {
			a.Close()
			return err
		}
	}
	log.Info("agent starting", "agent", a.ID(), "server", cfg.Server, "server_name", cfg.ServerName, "ca_file", cfg.CAFile, "token_file", f.tokenFile)
	err = a.Run(ctx)
	cancel()
	wait()
	return err
}
