package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/internal/cli"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtfile"
	"github.com/hotcert/hotcert/jwtkeys/jwtmetrics"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/source/file"
)

// defaultDrainWindow is the server's --drain-window and the agent's
// --reconnect-on-cert-change: after a certificate is renewed, every connection moves
// onto it within this window. A user expects a renewal to reach the other side (a
// long-lived stream would otherwise keep the old certificate for as long as it
// lives); the window spreads the reconnects (1,000 agents at about 100 per second),
// as hotcert demo does for a fleet of that size.
const defaultDrainWindow = 10 * time.Second

type serverFlags struct {
	drainWindow, drainGrace   time.Duration
	drainBeforeExpiry         time.Duration
	cutUntrusted              bool
	trustGuard                bool
	trustGuardMargin          time.Duration
	trustGuardRemember        time.Duration
	fleetRemember             time.Duration
	listen, metricsAddr       string
	certFile, keyFile, caFile string
	replica                   string
	maxConnAge, maxConnGrace  time.Duration
	workInterval              time.Duration
	pollInterval, settle      time.Duration
	metricsPrefix, metricsLbl string

	deny denyListFlags

	jwtKeyDir              string
	jwtMaxTTL, jwtTokenTTL time.Duration
	jwtGrace, jwtClockSkew time.Duration
	jwtIssuer, jwtAudience string
}

func newServerCommand(g *globals) *cobra.Command {
	f := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server --cert-file F --key-file F [--ca-file F] [--listen ADDR] [--metrics-bind-address ADDR]",
		Short: "Run the reference control plane: agents hold long-lived gRPC streams",
		Long: `Run hotcert's reference control plane: a gRPC server agents hold long-lived
bidirectional streams to (register, heartbeat, receive work).

The next TLS handshake after tls.crt/tls.key change serves the new pair; established
streams keep the certificate they were opened with. A pair that does not load keeps
the last good certificate serving, logs "TLS certificate reload failed"
(component=agent_grpc, the file paths) and counts once on
hotcert_tls_reload_failures_total{component="agent_grpc"}; it is retried when either
file changes. A missing or invalid pair at startup is a startup error.

By default a renewal reaches the agents: each connection opened under the previous
certificate gets a GOAWAY at a random time within --drain-window (10s), its stream
ends cleanly and the agent re-opens it at once on the new certificate; and a new leaf
whose issuer connected agents do not trust yet is held back (--trust-guard) while
the previous one keeps serving. --drain-window=0 and --trust-guard=false turn them
off. No connection outlives its certificates: each is drained the same way by
--drain-before-expiry (1m) before the agent's client certificate or the server
certificate it was served expires, spread over --drain-window
(reason=peer_cert_expiring or own_cert_expiring on
hotcert_tls_connections_drained_total). Agents whose stream closed stay in the fleet view (/healthz) as departed for
--fleet-remember (1m), so hotcert rotation status never proves a step on a fleet
emptied for a moment.

The pair comes from files: in Kubernetes, a mounted Secret volume, whose updates
the kubelet writes with an atomic ..data swap. (A program that reads the Secret
through the API uses the library's source/kube instead; docs/kubernetes-sources.md.)

With --ca-file, --deny-list and --crl-file (e.g. a mounted ConfigMap) revoke agent
certificates: by serial per issuer, by SPKI hash, by CRL (signed by a CA of
--ca-file, NextUpdate honoured, --stale-crl-policy). Every handshake, resumed ones
too, refuses a revoked agent, and a list that adds one closes its open connections
at once while every other stays up. The lists are re-read like the certificate: a
list that does not validate is refused once ("deny list reload failed") and the last
good one stays. /healthz?revoked_serial=HEX says whether the replica refuses a
serial and whether a connection of it is left (docs/revocation.md).

With --jwt-key-dir (a key directory: signing.key and optional verify.pem, e.g. a
mounted Secret), agents must present a bearer JWT issued
to their agent id and signed by a key the set accepts; a stream without one fails
with Unauthenticated. Connected agents receive fresh tokens, signed by the current
key, over their streams. The keys are followed like the certificate (rotation with
a grace period, last good keys kept, "JWT signing key reload failed" once per bad
content); /.well-known/jwks.json on --metrics-bind-address publishes the public keys.
docs/jwt-keys.md describes the rotation procedure.`,
		Example: `  hotcert server --cert-file /tls/tls.crt --key-file /tls/tls.key --metrics-bind-address :9090
  hotcert server --cert-file /tls/tls.crt --key-file /tls/tls.key --ca-file /ca/ca.crt
  hotcert server --cert-file /tls/tls.crt --key-file /tls/tls.key --jwt-key-dir /etc/agent-token-keys`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":9091", "gRPC address agents connect to")
	fl.StringVar(&f.certFile, "cert-file", "", "server certificate chain file (PEM, leaf first; required)")
	fl.StringVar(&f.keyFile, "key-file", "", "server private key file (PEM; required)")
	fl.StringVar(&f.caFile, "ca-file", "", "require client certificates (mTLS) that chain to this CA bundle file")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", "", "serve /metrics and /healthz on this address (off when empty)")
	fl.StringVar(&f.replica, "replica", "", "replica name reported to agents (default: host name)")
	fl.DurationVar(&f.maxConnAge, "max-connection-age", 0, "close connections after about this long (+/-10% jitter, GOAWAY) so agents reconnect (0: never); streams end only after --max-connection-age-grace")
	fl.DurationVar(&f.maxConnGrace, "max-connection-age-grace", 0, "how long streams may outlive --max-connection-age before the connection is cut (0: unbounded)")
	fl.DurationVar(&f.drainWindow, "drain-window", defaultDrainWindow, "after a certificate rotation, move agents onto it: each connection gets a GOAWAY at a random time within this window, N agents reconnect at about N/window per second (0: connections keep the old certificate until they close)")
	fl.DurationVar(&f.drainBeforeExpiry, "drain-before-expiry", drain.DefaultExpiryMargin, "end each connection this long before the certificates it was authenticated with expire (the agent's client certificate, the server certificate it was served), at times spread over --drain-window (0: connections may outlive them)")
	fl.DurationVar(&f.drainGrace, "drain-grace", 30*time.Second, "how long in-flight RPCs of a drained connection may run")
	f.deny.register(fl, "with --ca-file: refuse, and disconnect at once, agents whose certificate")
	fl.BoolVar(&f.cutUntrusted, "cut-untrusted", false, "with --ca-file: disconnect agents whose certificate no longer verifies after the bundle changes")
	fl.BoolVar(&f.trustGuard, "trust-guard", true, "hold a new certificate back while connected agents do not trust its issuer (they report their bundle); the previous one keeps serving (--trust-guard=false: serve every new certificate at once)")
	fl.DurationVar(&f.trustGuardMargin, "trust-guard-margin", controlplane.DefaultTrustGuardMargin, "with --trust-guard: serve a held certificate anyway once the previous one expires within this margin")
	fl.DurationVar(&f.trustGuardRemember, "trust-guard-remember", controlplane.DefaultTrustGuardRemember, "with --trust-guard: how long an agent whose stream closed still counts, with its last report")
	fl.DurationVar(&f.fleetRemember, "fleet-remember", controlplane.DefaultFleetRemember, "keep an agent whose stream closed in the fleet view (/healthz) as departed for this long, unless it comes back: rotation status counts it as not proven meanwhile (0: forget it at once)")
	fl.DurationVar(&f.workInterval, "work-interval", 0, "push a work item to every agent this often (0: never)")
	fl.DurationVar(&f.pollInterval, "poll-interval", hotcert.DefaultPollInterval, "re-read the certificate this often even without a file event")
	fl.DurationVar(&f.settle, "settle", hotcert.DefaultSettle, "how long a pair that does not load is treated as mid-write before it counts as a failure")
	fl.StringVar(&f.metricsPrefix, "metrics-prefix", "hotcert", "prefix of the TLS and JWT reload metrics (e.g. dexaflow)")
	fl.StringVar(&f.metricsLbl, "metrics-component-label", "component", "label carrying the component in the TLS and JWT metrics (e.g. listener)")
	fl.StringVar(&f.jwtKeyDir, "jwt-key-dir", "", "authenticate agents with JWTs signed by the keys of this directory (signing.key, optional verify.pem)")
	fl.DurationVar(&f.jwtMaxTTL, "jwt-max-ttl", jwtkeys.DefaultMaxTokenTTL, "longest lifetime of a token the server issues")
	fl.DurationVar(&f.jwtTokenTTL, "jwt-token-ttl", controlplane.DefaultTokenTTL, "lifetime of the tokens handed to agents (at most --jwt-max-ttl); renewed over the stream after a third of it")
	fl.DurationVar(&f.jwtGrace, "jwt-grace", 0, "how long a key replaced by a rotation keeps verifying (default: --jwt-max-ttl + --jwt-clock-skew + 5m)")
	fl.DurationVar(&f.jwtClockSkew, "jwt-clock-skew", jwtkeys.DefaultClockSkew, "leeway on a token's exp, nbf and iat")
	fl.StringVar(&f.jwtIssuer, "jwt-issuer", "", "iss claim of issued tokens, required in presented ones (off when empty)")
	fl.StringVar(&f.jwtAudience, "jwt-audience", "", "aud claim of issued tokens, required in presented ones (off when empty)")
	cli.Alias(fl, "cert-file", "tls-cert")
	cli.Alias(fl, "key-file", "tls-key")
	cli.Alias(fl, "ca-file", "client-ca")
	cli.Alias(fl, "metrics-bind-address", "metrics-listen")
	return cmd
}

func runServer(ctx context.Context, g *globals, f *serverFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	src, err := serverSource(f, log)
	if err != nil {
		return err
	}
	cfg := controlplane.Config{
		TLS:                   src,
		Replica:               f.replica,
		Logger:                log,
		MaxConnectionAge:      f.maxConnAge,
		MaxConnectionAgeGrace: f.maxConnGrace,
		DrainWindow:           f.drainWindow,
		DrainGrace:            f.drainGrace,
		DrainBeforeExpiry:     f.drainBeforeExpiry,
		CutUntrusted:          f.cutUntrusted,
		TrustGuard:            f.trustGuard,
		TrustGuardMargin:      f.trustGuardMargin,
		TrustGuardRemember:    f.trustGuardRemember,
		FleetRemember:         cmp.Or(f.fleetRemember, -1), // the flag's 0 keeps none
		WorkInterval:          f.workInterval,
		MetricsOptions:        f.metricsOptions(),
		ComponentKey:          f.metricsLbl,
		ReloaderOptions:       []hotcert.Option{hotcert.WithPollInterval(f.pollInterval), hotcert.WithSettle(f.settle)},
	}
	if cfg.Replica == "" {
		cfg.Replica, _ = os.Hostname()
	}
	if f.caFile != "" {
		if cfg.ClientCA, err = file.New(file.WithCA(f.caFile), file.WithLogger(log)); err != nil {
			return err
		}
	}
	if err := f.denyListConfig(&cfg, log); err != nil {
		return err
	}
	reg := newProcessRegistry()
	cfg.Registerer = reg
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var routes []route
	ks, stopKeys, err := serverKeySet(ctx, f, reg, log)
	if err != nil {
		return err
	}
	defer stopKeys()
	if ks != nil {
		cfg.Tokens, cfg.TokenTTL = ks, f.jwtTokenTTL
		routes = append(routes, route{"/.well-known/jwks.json", ks.JWKSHandler()})
	}
	srv, err := controlplane.New(cfg)
	if err != nil {
		return inUserTerms(err, f.fileFlags())
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	wait := func() {}
	if f.metricsAddr != "" {
		if wait, err = serveObservability(ctx, f.metricsAddr, reg, srv.HealthHandler(), log, routes...); err != nil {
			ln.Close()
			return err
		}
	}
	attrs := []any{"addr", ln.Addr().String(), "replica", cfg.Replica, f.metricsLbl, controlplane.DefaultComponent, "mtls", f.caFile != "", "agent_tokens", ks != nil,
		"drain_window", f.drainWindow.String(), "trust_guard", f.trustGuard}
	if ks != nil {
		attrs = append(attrs, "token_ttl", cfg.TokenTTL.String())
	}
	log.Info("control plane listening", attrs...)
	err = srv.Serve(ctx, ln)
	cancel()
	wait()
	return err
}

// serverKeySet loads and follows the agent-token key set the flags describe, or
// returns nil without --jwt-key-dir. stop stops following it.
func serverKeySet(ctx context.Context, f *serverFlags, reg *prometheus.Registry, log *slog.Logger) (ks *jwtkeys.KeySet, stop func(), err error) {
	src, err := keySource(f.jwtKeyDir, log)
	if err != nil || src == nil {
		return nil, func() {}, err
	}
	if f.jwtGrace > 0 && f.jwtGrace < f.jwtMaxTTL+f.jwtClockSkew {
		return nil, nil, fmt.Errorf("--jwt-grace %s: shorter than --jwt-max-ttl (%s) plus --jwt-clock-skew (%s): tokens signed just before a rotation would be refused before they expire", f.jwtGrace, f.jwtMaxTTL, f.jwtClockSkew)
	}
	if f.jwtTokenTTL <= 0 || f.jwtTokenTTL > f.jwtMaxTTL {
		return nil, nil, fmt.Errorf("--jwt-token-ttl %s: want a positive lifetime of at most --jwt-max-ttl (%s)", f.jwtTokenTTL, f.jwtMaxTTL)
	}
	rec, err := jwtmetrics.New(reg, f.metricsOptions()...)
	if err != nil {
		return nil, nil, err
	}
	opts := []jwtkeys.Option{
		jwtkeys.WithMaxTokenTTL(f.jwtMaxTTL), jwtkeys.WithClockSkew(f.jwtClockSkew),
		hotcert.WithLogger(log), jwtkeys.WithObserver(rec),
		hotcert.WithPollInterval(f.pollInterval), hotcert.WithSettle(f.settle),
	}
	if f.jwtGrace > 0 {
		opts = append(opts, jwtkeys.WithGracePeriod(f.jwtGrace))
	}
	if f.jwtIssuer != "" {
		opts = append(opts, jwtkeys.WithIssuer(f.jwtIssuer))
	}
	if f.jwtAudience != "" {
		opts = append(opts, jwtkeys.WithAudience(f.jwtAudience))
	}
	ks, err = jwtkeys.New(ctx, src, opts...)
	if err != nil {
		return nil, nil, inUserTerms(err, flagFiles{dirs: map[string]string{f.jwtKeyDir: "--jwt-key-dir"}})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ks.Start(ctx); err != nil {
			log.Error("agent-token keys: following the source failed", "source", src.String(), "error", err.Error())
		}
	}()
	return ks, func() { ks.Close(); <-done }, nil
}

// denyListConfig sets cfg's deny list from --deny-list, --crl-file and
// --stale-crl-policy.
func (f *serverFlags) denyListConfig(cfg *controlplane.Config, log *slog.Logger) error {
	src, policy, err := f.deny.source(log)
	if err != nil {
		return err
	}
	if src != nil && f.caFile == "" {
		return errors.New("--deny-list and --crl-file need --ca-file: they revoke client certificates, which only mTLS asks for")
	}
	cfg.DenyList, cfg.StaleCRLPolicy = src, policy
	return nil
}

// serverSource returns the certificate source the flags describe.
func serverSource(f *serverFlags, log *slog.Logger) (hotcert.Source, error) {
	if f.certFile == "" || f.keyFile == "" {
		return nil, errors.New("--cert-file and --key-file are required: the server certificate chain and its private key (PEM; hotcert pki makes test ones)")
	}
	return file.New(file.WithKeyPair(f.certFile, f.keyFile), file.WithLogger(log))
}

// keyDirSource reads a key directory: signing.key and optional verify.pem, or, when
// the directory holds hs256.keys and no signing.key, the HS256 secret list (and
// optional verify.pem).
func keyDirSource(dir string, log *slog.Logger) (*jwtfile.Source, error) {
	layout := jwtfile.Dir(dir)
	if _, err := os.Stat(filepath.Join(dir, jwtkeys.SigningKeyName)); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, jwtkeys.HMACSecretsName)); err == nil {
			layout = jwtfile.Layout{HMACSecrets: filepath.Join(dir, jwtkeys.HMACSecretsName),
				VerificationKeys: filepath.Join(dir, jwtkeys.VerificationKeysName)}
		}
	}
	src, err := jwtfile.New(layout, file.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("--jwt-key-dir: %w", err)
	}
	return src, nil
}

// keySource returns the JWT key source of --jwt-key-dir (nil when it is not given).
func keySource(keyDir string, log *slog.Logger) (jwtkeys.Source, error) {
	if keyDir == "" {
		return nil, nil
	}
	return keyDirSource(keyDir, log)
}

// fileFlags maps the files the flags name to the flags, for inUserTerms.
func (f *serverFlags) fileFlags() flagFiles {
	return fileFlags("--cert-file", f.certFile, "--key-file", f.keyFile, "--ca-file", f.caFile, "--deny-list", f.deny.list, "--crl-file", f.deny.crl)
}

// metricsOptions name the TLS and JWT metrics as the flags say.
func (f *serverFlags) metricsOptions() []metrics.Option {
	return []metrics.Option{metrics.WithPrefix(f.metricsPrefix), metrics.WithComponentLabel(f.metricsLbl)}
}
