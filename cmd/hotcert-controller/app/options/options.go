// Package options holds hotcert-controller's command line: its flags, their
// defaults and checks, and the completed configuration they describe (the
// rollout controller's library options, the API server connection, the
// manager's endpoints and leader election). Deployment manifests can be
// checked against it: parse a container's arguments with [New], AddFlags and
// Validate.
package options

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hotcert/hotcert/rollout/census"
	"github.com/hotcert/hotcert/rollout/controller"
)

// Options are hotcert-controller's flags: the rollout controller's options
// and the process's scope, endpoints and leader election.
type Options struct {
	controller.Options

	// NamespaceSelectorString and WorkloadSelectorString are label selectors
	// (kubectl's syntax): only namespaces, and workloads, whose labels match
	// are watched.
	NamespaceSelectorString string
	WorkloadSelectorString  string
	// Kubeconfig is a kubeconfig file (default: $KUBECONFIG, the in-cluster
	// configuration, or ~/.kube/config).
	Kubeconfig string
	// HashKeyFile holds the key of the HMAC-SHA256 config hashes.
	HashKeyFile string

	MetricsAddr string // Prometheus /metrics; "0" disables
	ProbeAddr   string // /healthz and /readyz; "0" disables
	// PprofAddr serves Go's /debug/pprof/ profiles (heap, CPU, goroutines)
	// to whoever reaches it; "" or "0" (the default) disables it.
	PprofAddr string

	// WebhookAddr serves the admission webhook that keeps the stamp and the
	// controller's state when an owner controller rewrites a workload; "" or
	// "0" disables it. WebhookCertFile and WebhookKeyFile are its serving
	// certificate and key, reloaded when they change.
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
	LeaderElectionNamespace string // default: the pod's namespace, or the kubeconfig context's
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration

	// Census keeps the census of TrustRotations (see package
	// rollout/census), one every CensusInterval.
	Census         bool
	CensusInterval time.Duration
	// CensusPrometheus is how the census reaches a Prometheus behind
	// authentication or TLS.
	CensusPrometheus Prometheus
	// CensusDrive lets TrustRotations in mode Drive take their steps.
	CensusDrive bool

	// inClusterNamespaceFile is where a pod reads its namespace.
	inClusterNamespaceFile string
}

// New returns the options with the defaults the flags show.
func New() *Options {
	return &Options{
		Options: controller.Options{
			MinInterval:             controller.DefaultMinInterval,
			ExpiryMargin:            controller.DefaultExpiryMargin,
			MaxRollouts:             controller.DefaultMaxRollouts,
			BudgetWindow:            controller.DefaultBudgetWindow,
			RolloutWaitTimeout:      controller.DefaultRolloutWaitTimeout,
			MaxConcurrentReconciles: controller.DefaultMaxConcurrency,
			MetricsPrefix:           controller.DefaultMetricsPrefix,
			SecretCache:             controller.CacheReferenced,
			ReferenceRules:          true,
		},
		MetricsAddr:            ":8080",
		ProbeAddr:              ":8081",
		PprofAddr:              "0",
		WebhookAddr:            "0",
		QPS:                    50,
		Burst:                  100,
		LeaderElect:            true,
		LeaderElectionID:       "hotcert-controller",
		LeaseDuration:          15 * time.Second,
		RenewDeadline:          10 * time.Second,
		RetryPeriod:            2 * time.Second,
		CensusInterval:         census.DefaultInterval,
		inClusterNamespaceFile: "/var/run/secrets/kubernetes.io/serviceaccount/namespace",
	}
}

// AddFlags binds o to command-line flags; the current values of o are the
// defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.Namespaces, "namespace", o.Namespaces, "watch only this namespace (repeatable; default: all namespaces)")
	fs.StringVar(&o.NamespaceSelectorString, "namespace-selector", o.NamespaceSelectorString, "watch only the namespaces whose labels match this label selector, e.g. team=payments (with --namespace: those of them that match); a namespace is picked up when it starts matching and dropped when it stops")
	fs.StringVar(&o.WorkloadSelectorString, "workload-selector", o.WorkloadSelectorString, "watch only the Deployments, StatefulSets and DaemonSets whose labels match this label selector, e.g. app.kubernetes.io/part-of=shop; a workload that stops matching is no longer rolled (an OutOfScope Event says so)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: $KUBECONFIG, in-cluster config, or ~/.kube/config)")
	fs.DurationVar(&o.MinInterval, "min-interval", o.MinInterval, "minimum time between two rollouts of one workload; changes inside it coalesce into one rollout at its end (annotation hotcert.dev/min-interval overrides)")
	fs.Float64Var(&o.ExpiryMargin, "expiry-margin", o.ExpiryMargin, "share of the lifetime of the leaf certificate a workload's pods run, before its NotAfter, at which a change waiting for a rollout window rolls anyway (annotation hotcert.dev/expiry-margin overrides; see hotcert.dev/rollout-windows)")
	fs.IntVar(&o.MaxRollouts, "max-rollouts-per-minute", o.MaxRollouts, "global cap on rollouts per minute across all workloads (-1: no cap)")
	fs.DurationVar(&o.RolloutWaitTimeout, "rollout-wait-timeout", o.RolloutWaitTimeout, "how long a change waits for the workload's previous rollout to finish before rolling anyway")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "write nothing: report the rollouts that would be made with Events and metrics")
	fs.StringVar(&o.HashKeyFile, "hash-key-file", o.HashKeyFile, "file holding a key for HMAC-SHA256 config hashes (keeps workload readers from testing guesses of low-entropy Secret values)")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "workloads of one kind reconciled in parallel")
	fs.StringVar(&o.MetricsPrefix, "metrics-prefix", o.MetricsPrefix, "prefix of the controller's metric names")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus /metrics endpoint (0 disables)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "address of the /healthz and /readyz endpoints (0 disables)")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "address of Go's /debug/pprof/ profiles, e.g. 127.0.0.1:6060 (0 disables; they are not authenticated: bind to loopback)")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "requests per second to the API server")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "burst of requests to the API server")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader among replicas with a Lease; only the leader rolls workloads")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease (default: the pod's namespace; outside a cluster, the kubeconfig context's namespace)")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "leader election retry period")
	fs.BoolVar(&o.ReferenceRules, "reference-rules", o.ReferenceRules, "follow ReferenceRules (hotcert.dev/v1alpha1): roll the workloads of custom resources whose chains reach a changed Secret or ConfigMap (needs read access to the kinds the rules name; without the ReferenceRule CRD, the controller waits for it)")
	fs.StringVar(&o.WebhookAddr, "webhook-bind-address", o.WebhookAddr, "address of the admission webhook that keeps the rollout stamp when an owner controller rewrites a workload's pod template, e.g. :9443 (0 disables)")
	fs.StringVar(&o.WebhookCertFile, "webhook-cert-file", o.WebhookCertFile, "serving certificate (chain) of the webhook, PEM; reloaded when it changes")
	fs.StringVar(&o.WebhookKeyFile, "webhook-key-file", o.WebhookKeyFile, "private key of the webhook's serving certificate, PEM")
	fs.BoolVar(&o.Census, "census", o.Census, "keep the census of every TrustRotation (hotcert.dev/v1alpha1): which pods consume its trust objects and server certificates, what each holds and how that is known, one condition per rotation step (needs the TrustRotation CRD and read access to pods and endpointslices; see docs/census.md)")
	fs.DurationVar(&o.CensusInterval, "census-interval", o.CensusInterval, "how often each TrustRotation's census is taken (pod changes also trigger one)")
	o.CensusPrometheus.addFlags(fs)
	fs.BoolVar(&o.CensusDrive, "census-drive", o.CensusDrive, "let TrustRotations in mode Drive take their steps: write their bundles, switch their cert-manager Certificates, roll opted-in workloads (needs --census and the write access of docs/ca-rotation.md); without it they are only observed")
	fs.StringVar((*string)(&o.SecretCache), "secret-cache", string(o.SecretCache), "how to watch Secrets and ConfigMaps: referenced (whole objects, keep digests of referenced ones only: no read per change) or metadata (metadata only, one GET per change of a referenced object: least memory and traffic)")
}

// WebhookEnabled reports whether the options serve the admission webhook.
func (o *Options) WebhookEnabled() bool { return o.WebhookAddr != "" && o.WebhookAddr != "0" }

// Validate checks the options, naming the flag at fault; it reads no file.
func (o *Options) Validate() error {
	switch {
	case o.MaxRollouts == 0:
		return errors.New("--max-rollouts-per-minute 0 would never roll anything; use -1 for no cap")
	case o.LeaderElect && o.LeaderElectionID == "":
		return errors.New("--leader-election-id is empty")
	case o.WebhookEnabled() && (o.WebhookCertFile == "" || o.WebhookKeyFile == ""):
		return errors.New("--webhook-bind-address needs --webhook-cert-file and --webhook-key-file")
	case o.RolloutWaitTimeout < 0:
		return fmt.Errorf("--rollout-wait-timeout %s is negative", o.RolloutWaitTimeout)
	case o.MaxConcurrentReconciles < 0:
		return fmt.Errorf("--max-concurrent-reconciles %d is negative", o.MaxConcurrentReconciles)
	case o.SecretCache != controller.CacheReferenced && o.SecretCache != controller.CacheMetadata:
		return fmt.Errorf("--secret-cache %q: want referenced or metadata", o.SecretCache)
	case o.Census && o.CensusInterval <= 0:
		return fmt.Errorf("--census-interval %s: want a positive duration", o.CensusInterval)
	case o.CensusDrive && !o.Census:
		return fmt.Errorf("--census-drive needs --census")
	}
	if err := o.CensusPrometheus.validate(); err != nil {
		return err
	}
	if _, err := labels.Parse(o.NamespaceSelectorString); err != nil {
		return fmt.Errorf("--namespace-selector %q: %w", o.NamespaceSelectorString, err)
	}
	if _, err := labels.Parse(o.WorkloadSelectorString); err != nil {
		return fmt.Errorf("--workload-selector %q: %w", o.WorkloadSelectorString, err)
	}
	return nil
}

// Config is what completed options run: the rollout controller's options
// (the namespaces it watches among them), the API server it talks to, and the
// manager's endpoints and leader election (the caller adds the controller's
// cache and client options).
type Config struct {
	Controller controller.Options
	// Census is the census controller's options (nil without --census).
	Census *census.Options
	REST   *rest.Config
	// RESTFrom says where REST came from, for messages: `kubeconfig context "C"`
	// or "the in-cluster configuration".
	RESTFrom string
	Manager  ctrl.Options
}

// Complete validates the options, reads the files they name (the hash key,
// the kubeconfig) and returns the configuration they describe. Outside a
// cluster, without --leader-election-namespace, the leader election Lease
// goes to the kubeconfig context's namespace, or, if it names none, leader
// election is off; log says which.
func (o *Options) Complete(log logr.Logger) (*Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Config{Controller: o.Options}
	// Validate parsed them.
	c.Controller.NamespaceSelector, _ = labels.Parse(o.NamespaceSelectorString)
	c.Controller.WorkloadSelector, _ = labels.Parse(o.WorkloadSelectorString)
	if c.Controller.MinInterval == 0 {
		c.Controller.MinInterval = -1 // the library's zero means "default"; --min-interval=0 means none
	}
	if o.WebhookEnabled() {
		c.Controller.Webhook = controller.Webhook{Addr: o.WebhookAddr, CertFile: o.WebhookCertFile, KeyFile: o.WebhookKeyFile}
	}
	if o.Census {
		// The census counts the pods of the namespaces the controller watches.
		c.Census = &census.Options{Interval: o.CensusInterval, MetricsPrefix: o.MetricsPrefix,
			Namespaces: o.Namespaces, NamespaceSelector: c.Controller.NamespaceSelector, Drive: o.CensusDrive,
			SkipNameValidation: o.SkipNameValidation}
		if err := o.CensusPrometheus.complete(c.Census); err != nil {
			return nil, err
		}
	}
	if o.HashKeyFile != "" {
		key, err := readHashKey(o.HashKeyFile)
		if err != nil {
			return nil, err
		}
		c.Controller.HashKey = key
	}
	rc, from, kubeNamespace, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	c.REST, c.RESTFrom = rc, from
	c.Manager = ctrl.Options{
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
	}
	if o.LeaderElect && o.LeaderElectionNamespace == "" && !o.inCluster() {
		if kubeNamespace != "" {
			c.Manager.LeaderElectionNamespace = kubeNamespace
			log.Info("not running in a cluster: the leader election Lease goes to the kubeconfig context's namespace (--leader-election-namespace chooses another)",
				"namespace", kubeNamespace, "lease", o.LeaderElectionID)
		} else {
			c.Manager.LeaderElection = false
			log.Info("not running in a cluster and the kubeconfig context names no namespace: leader election is off, so run one replica (--leader-election-namespace turns it on)")
		}
	}
	return c, nil
}

// inCluster reports whether the process runs in a pod with a service account
// (where controller-runtime finds the Lease's namespace by itself).
func (o *Options) inCluster() bool {
	_, err := os.Stat(o.inClusterNamespaceFile)
	return err == nil && os.Getenv("KUBERNETES_SERVICE_HOST") != ""
}

// restConfig loads the API server configuration the options point at, where
// it came from (for messages), and the namespace of the kubeconfig context (""
// when it names none, or in a cluster).
func (o *Options) restConfig() (rc *rest.Config, from, ns string, err error) {
	if o.Kubeconfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" && o.inCluster() {
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, "", "", fmt.Errorf("in-cluster configuration: %w", err)
		}
		from = "the in-cluster configuration"
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.Kubeconfig
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		if rc, err = cc.ClientConfig(); err != nil {
			if clientcmd.IsEmptyConfig(err) {
				return nil, "", "", errors.New("no cluster to talk to: set --kubeconfig (or $KUBECONFIG), or run the controller in a pod")
			}
			return nil, "", "", fmt.Errorf("loading the kubeconfig (--kubeconfig): %w", err)
		}
		from = "the kubeconfig"
		if raw, err := cc.RawConfig(); err == nil {
			from = fmt.Sprintf("kubeconfig context %q", raw.CurrentContext)
			if ctx := raw.Contexts[raw.CurrentContext]; ctx != nil {
				ns = ctx.Namespace
			}
		}
	}
	if o.QPS > 0 {
		rc.QPS = o.QPS
	}
	if o.Burst > 0 {
		rc.Burst = o.Burst
	}
	rc.UserAgent = "hotcert-controller"
	return rc, from, ns, nil
}

// readHashKey reads the key of --hash-key-file.
func readHashKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--hash-key-file: %w", err)
	}
	key = []byte(strings.TrimSpace(string(key)))
	if len(key) < 16 {
		return nil, fmt.Errorf("--hash-key-file %s: the key must be at least 16 bytes", path)
	}
	return key, nil
}
