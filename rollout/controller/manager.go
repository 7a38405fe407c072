package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Config is a whole controller process: the controller's Options, and the
// manager's scope, endpoints and leader election.
type Config struct {
	Options

	// Namespaces restricts the controller to these namespaces (default: all).
	Namespaces []string
	// Kubeconfig is a kubeconfig file (default: $KUBECONFIG, in-cluster, or
	// ~/.kube/config).
	Kubeconfig string
	// HashKeyFile holds the key of Options.HashKey.
	HashKeyFile string

	MetricsAddr string // Prometheus /metrics; "0" disables
	ProbeAddr   string // /healthz and /readyz; "0" disables

	// WebhookAddr serves the admission webhook that keeps the stamp and the
	// controller's state when an owner controller rewrites a workload (see
	// package rollout/chain/webhook); "" or "0" disables it. WebhookCertFile
	// and WebhookKeyFile are its serving certificate and key, hot-reloaded.
	WebhookAddr     string
	WebhookCertFile string
	WebhookKeyFile  string

	// QPS and Burst limit the controller's requests to the API server
	// (client-go's defaults, 5 and 10, would make a start with many workloads
	// to adopt take minutes).
	QPS   float32
	Burst int

	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string // default: the pod's namespace
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
}

// DefaultConfig returns the configuration the flags default to.
func DefaultConfig() Config {
	return Config{
		Options: Options{
			MinInterval:             DefaultMinInterval,
			MaxRollouts:             DefaultMaxRollouts,
			BudgetWindow:            DefaultBudgetWindow,
			RolloutWaitTimeout:      DefaultRolloutWaitTimeout,
			MaxConcurrentReconciles: DefaultMaxConcurrency,
			MetricsPrefix:           DefaultMetricsPrefix,
			SecretCache:             CacheReferenced,
			ReferenceRules:          true,
		},
		MetricsAddr:      ":8080",
		ProbeAddr:        ":8081",
		WebhookAddr:      "0",
		QPS:              50,
		Burst:            100,
		LeaderElect:      true,
		LeaderElectionID: "hotcert-controller",
		LeaseDuration:    15 * time.Second,
		RenewDeadline:    10 * time.Second,
		RetryPeriod:      2 * time.Second,
	}
}

// AddFlags binds c to command-line flags; the current values of c are the
// defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.Namespaces, "namespace", c.Namespaces, "watch only this namespace (repeatable; default: all namespaces)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig file (default: $KUBECONFIG, in-cluster config, or ~/.kube/config)")
	fs.DurationVar(&c.MinInterval, "min-interval", c.MinInterval, "minimum time between two rollouts of one workload; changes inside it coalesce into one rollout at its end (annotation hotcert.dev/min-interval overrides)")
	fs.IntVar(&c.MaxRollouts, "max-rollouts-per-minute", c.MaxRollouts, "global cap on rollouts per minute across all workloads (-1: no cap)")
	fs.DurationVar(&c.RolloutWaitTimeout, "rollout-wait-timeout", c.RolloutWaitTimeout, "how long a change waits for the workload's previous rollout to finish before rolling anyway")
	fs.BoolVar(&c.DryRun, "dry-run", c.DryRun, "write nothing: report the rollouts that would be made with Events and metrics")
	fs.StringVar(&c.HashKeyFile, "hash-key-file", c.HashKeyFile, "file holding a key for HMAC-SHA256 config hashes (keeps workload readers from testing guesses of low-entropy Secret values)")
	fs.IntVar(&c.MaxConcurrentReconciles, "max-concurrent-reconciles", c.MaxConcurrentReconciles, "workloads of one kind reconciled in parallel")
	fs.StringVar(&c.MetricsPrefix, "metrics-prefix", c.MetricsPrefix, "prefix of the controller's metric names")
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", c.MetricsAddr, "address of the Prometheus /metrics endpoint (0 disables)")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", c.ProbeAddr, "address of the /healthz and /readyz endpoints (0 disables)")
	fs.Float32Var(&c.QPS, "kube-api-qps", c.QPS, "requests per second to the API server")
	fs.IntVar(&c.Burst, "kube-api-burst", c.Burst, "burst of requests to the API server")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "elect a leader among replicas with a Lease; only the leader rolls workloads")
	fs.StringVar(&c.LeaderElectionID, "leader-election-id", c.LeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", c.LeaderElectionNamespace, "namespace of the leader election Lease (default: the pod's namespace)")
	fs.DurationVar(&c.LeaseDuration, "leader-election-lease-duration", c.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&c.RenewDeadline, "leader-election-renew-deadline", c.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&c.RetryPeriod, "leader-election-retry-period", c.RetryPeriod, "leader election retry period")
	fs.BoolVar(&c.ReferenceRules, "reference-rules", c.ReferenceRules, "follow ReferenceRules (hotcert.dev/v1alpha1): roll the workloads of custom resources whose chains reach a changed Secret or ConfigMap (needs the ReferenceRule CRD, and read access to the kinds the rules name)")
	fs.StringVar(&c.WebhookAddr, "webhook-bind-address", c.WebhookAddr, "address of the admission webhook that keeps the rollout stamp when an owner controller rewrites a workload's pod template, e.g. :9443 (0 disables)")
	fs.StringVar(&c.WebhookCertFile, "webhook-cert-file", c.WebhookCertFile, "serving certificate (chain) of the webhook, PEM; reloaded when it changes")
	fs.StringVar(&c.WebhookKeyFile, "webhook-key-file", c.WebhookKeyFile, "private key of the webhook's serving certificate, PEM")
	fs.StringVar((*string)(&c.SecretCache), "secret-cache", string(c.SecretCache), "how to watch Secrets and ConfigMaps: referenced (whole objects, keep digests of referenced ones only: no read per change), metadata (metadata only, one GET per change of a referenced object: least memory and traffic), full (cache everything, as Reloader and wave do; for comparison)")
}

// Validate checks c (it reads no file).
func (c *Config) Validate() error {
	if c.MaxRollouts == 0 {
		return errors.New("--max-rollouts-per-minute 0 would never roll anything; use -1 for no cap")
	}
	if c.LeaderElect && c.LeaderElectionID == "" {
		return errors.New("--leader-election-id is empty")
	}
	if c.webhookEnabled() && (c.WebhookCertFile == "" || c.WebhookKeyFile == "") {
		return errors.New("--webhook-bind-address needs --webhook-cert-file and --webhook-key-file")
	}
	if c.MinInterval == 0 {
		c.MinInterval = -1 // Options' zero means "default"; --min-interval=0 means none
	}
	return c.Options.Validate()
}

func (c *Config) webhookEnabled() bool { return c.WebhookAddr != "" && c.WebhookAddr != "0" }

// loadHashKey reads HashKeyFile into HashKey.
func (c *Config) loadHashKey() error {
	if c.HashKeyFile == "" {
		return nil
	}
	key, err := os.ReadFile(c.HashKeyFile)
	if err != nil {
		return fmt.Errorf("--hash-key-file: %w", err)
	}
	key = []byte(strings.TrimSpace(string(key)))
	if len(key) < 16 {
		return fmt.Errorf("--hash-key-file %s: the key must be at least 16 bytes", c.HashKeyFile)
	}
	c.HashKey = key
	return nil
}

// RESTConfig returns the API server configuration c points at.
func (c *Config) RESTConfig() (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if c.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	} else {
		rc, err = ctrl.GetConfig()
	}
	if err != nil {
		return nil, err
	}
	if c.QPS > 0 {
		rc.QPS = c.QPS
	}
	if c.Burst > 0 {
		rc.Burst = c.Burst
	}
	rc.UserAgent = "hotcert-controller"
	return rc, nil
}

// NewManager returns a manager running the rollout controller, with its cache
// configured as CacheOptions says, health and readiness checks, metrics and
// leader election as c says.
func NewManager(rc *rest.Config, c Config, logger logr.Logger) (manager.Manager, *Controller, error) {
	ws, err := c.webhookServer(logger)
	if err != nil {
		return nil, nil, err
	}
	return newManager(rc, c, logger, ws)
}

// webhookServer loads the webhook's certificate, if the webhook is on: a bad
// certificate is a startup error.
func (c *Config) webhookServer(logger logr.Logger) (*webhookServer, error) {
	if !c.webhookEnabled() {
		return nil, nil
	}
	return newWebhookServer(c.WebhookAddr, c.WebhookCertFile, c.WebhookKeyFile, logger, c.Options)
}

func newManager(rc *rest.Config, c Config, logger logr.Logger, ws *webhookServer) (manager.Manager, *Controller, error) {
	ctl, err := New(c.Options)
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Logger:                        logger,
		Cache:                         ctl.CacheOptions(c.Namespaces...),
		Client:                        ctl.ClientOptions(),
		Metrics:                       metricsserver.Options{BindAddress: c.MetricsAddr},
		HealthProbeBindAddress:        c.ProbeAddr,
		LeaderElection:                c.LeaderElect,
		LeaderElectionID:              c.LeaderElectionID,
		LeaderElectionNamespace:       c.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &c.LeaseDuration,
		RenewDeadline:                 &c.RenewDeadline,
		RetryPeriod:                   &c.RetryPeriod,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("rollout: creating the manager: %w", err)
	}
	if err := ctl.SetupWithManager(mgr); err != nil {
		return nil, nil, err
	}
	if ws != nil {
		if err := mgr.Add(ws); err != nil {
			return nil, nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(*http.Request) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches are not synced")
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return mgr, ctl, nil
}

// Run runs the controller process c describes until ctx is done.
func Run(ctx context.Context, c Config, logger logr.Logger) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := c.loadHashKey(); err != nil {
		return err
	}
	ws, err := c.webhookServer(logger)
	if err != nil {
		return err
	}
	rc, err := c.RESTConfig()
	if err != nil {
		return fmt.Errorf("rollout: loading the kubeconfig: %w", err)
	}
	mgr, _, err := newManager(rc, c, logger, ws)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
