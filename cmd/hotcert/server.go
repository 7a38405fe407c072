package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/source/kube"
)

type serverFlags struct {
	drainWindow, drainGrace   time.Duration
	cutUntrusted              bool
	listen, metricsListen     string
	tlsCert, tlsKey, clientCA string
	tlsSecret, kubeconfig     string
	replica                   string
	maxConnAge, maxConnGrace  time.Duration
	workInterval              time.Duration
	pollInterval, settle      time.Duration
	metricsPrefix, metricsLbl string
}

func newServerCommand(g *globals) *cobra.Command {
	f := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server --tls-cert F --tls-key F [--client-ca F] [--listen ADDR] [--metrics-listen ADDR]",
		Short: "Run the reference control plane: agents hold long-lived gRPC streams",
		Long: `Run hotcert's reference control plane (seed 002). Agents open long-lived
bidirectional gRPC streams (register, heartbeat, receive work).

The next TLS handshake after tls.crt/tls.key change serves the new pair; established
streams keep the certificate they were opened with. A pair that does not load keeps
the last good certificate serving, logs "TLS certificate reload failed"
(listener=agent_grpc, the file paths) and counts once on
hotcert_tls_reload_failures_total{component="agent_grpc"}; it is retried when either
file changes. A missing or invalid pair at startup is a startup error.

The pair comes from files (a mounted Secret volume) or, with --tls-secret, from a
kubernetes.io/tls Secret read through the API (kubeconfig from --kubeconfig,
$KUBECONFIG, ~/.kube/config or the in-cluster service account).`,
		Example: `  hotcert server --tls-cert /tls/tls.crt --tls-key /tls/tls.key --metrics-listen :9090
  hotcert server --tls-secret dexaflow/agent-grpc-tls --client-ca /ca/ca.crt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":9091", "gRPC address agents connect to")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "server certificate chain file (PEM, leaf first)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "server private key file (PEM)")
	fl.StringVar(&f.tlsSecret, "tls-secret", "", "read the pair from this kubernetes.io/tls Secret (namespace/name) instead of files")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig for --tls-secret (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fl.StringVar(&f.clientCA, "client-ca", "", "require client certificates (mTLS) that chain to this CA bundle file")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics and /healthz on this address (off when empty)")
	fl.StringVar(&f.replica, "replica", "", "replica name reported to agents (default: host name)")
	fl.DurationVar(&f.maxConnAge, "max-connection-age", 0, "close connections after about this long (+/-10% jitter, GOAWAY) so agents reconnect (0: never)")
	fl.DurationVar(&f.maxConnGrace, "max-connection-age-grace", 0, "how long streams may outlive --max-connection-age (0: unbounded)")
	fl.DurationVar(&f.drainWindow, "drain-window", 0, "after a certificate rotation, move agents onto it: each connection gets a GOAWAY at a random time within this window (0: connections keep the old certificate)")
	fl.DurationVar(&f.drainGrace, "drain-grace", 30*time.Second, "how long in-flight RPCs of a drained connection may run")
	fl.BoolVar(&f.cutUntrusted, "cut-untrusted", false, "with --client-ca: disconnect agents whose certificate no longer verifies after the bundle changes")
	fl.DurationVar(&f.workInterval, "work-interval", 0, "push a work item to every agent this often (0: never)")
	fl.DurationVar(&f.pollInterval, "poll-interval", hotcert.DefaultPollInterval, "re-read the certificate this often even without a file event")
	fl.DurationVar(&f.settle, "settle", hotcert.DefaultSettle, "how long a pair that does not load is treated as mid-write before it counts as a failure")
	fl.StringVar(&f.metricsPrefix, "metrics-prefix", "hotcert", "prefix of the TLS reload metrics (e.g. dexaflow)")
	fl.StringVar(&f.metricsLbl, "metrics-component-label", "component", "label carrying the component in the TLS reload metrics (e.g. listener)")
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
		CutUntrusted:          f.cutUntrusted,
		WorkInterval:          f.workInterval,
		MetricsOptions:        []metrics.Option{metrics.WithPrefix(f.metricsPrefix), metrics.WithComponentLabel(f.metricsLbl)},
		ReloaderOptions:       []hotcert.Option{hotcert.WithPollInterval(f.pollInterval), hotcert.WithSettle(f.settle)},
	}
	if cfg.Replica == "" {
		cfg.Replica, _ = os.Hostname()
	}
	if f.clientCA != "" {
		if cfg.ClientCA, err = file.New(file.WithCA(f.clientCA), file.WithLogger(log)); err != nil {
			return err
		}
	}
	reg := newProcessRegistry()
	cfg.Registerer = reg
	srv, err := controlplane.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := func() {}
	if f.metricsListen != "" {
		if wait, err = serveObservability(ctx, f.metricsListen, reg, srv.HealthHandler(), log); err != nil {
			ln.Close()
			return err
		}
	}
	log.Info("control plane listening", "addr", ln.Addr().String(), "replica", cfg.Replica, "listener", controlplane.DefaultComponent, "mtls", f.clientCA != "")
	err = srv.Serve(ctx, ln)
	cancel()
	wait()
	return err
}

// serverSource returns the certificate source the flags describe.
func serverSource(f *serverFlags, log *slog.Logger) (hotcert.Source, error) {
	files := f.tlsCert != "" || f.tlsKey != ""
	switch {
	case files && f.tlsSecret != "":
		return nil, errors.New("give either --tls-cert/--tls-key or --tls-secret, not both")
	case f.tlsSecret != "":
		ns, name, ok := strings.Cut(f.tlsSecret, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--tls-secret %q: want namespace/name", f.tlsSecret)
		}
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = f.kubeconfig
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("--tls-secret: kubeconfig: %w", err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("--tls-secret: %w", err)
		}
		log.Info("reading the server certificate from a Secret", "secret", f.tlsSecret, "api_server", rc.Host)
		return kube.NewSecret(cs, ns, name, kube.WithLogger(log)), nil
	case f.tlsCert == "" || f.tlsKey == "":
		return nil, errors.New("--tls-cert and --tls-key are required (or --tls-secret)")
	}
	return file.New(file.WithKeyPair(f.tlsCert, f.tlsKey), file.WithLogger(log))
}
