// Package app is the hotcert-controller process: its command line (package
// options) and the manager that runs the rollout controller with health and
// readiness checks, metrics, leader election and, if asked, the admission
// webhook.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/hotcert/hotcert/cmd/hotcert-controller/app/options"
	"github.com/hotcert/hotcert/cmd/internal/cli"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
	"github.com/hotcert/hotcert/rollout/controller"
)

// The census reads TrustRotations: their types join client-go's scheme, the
// manager's default, once, before any manager reads it. A scheme of its own
// would register every built-in type a second time (about 1 MiB of the
// process's heap).
func init() {
	if err := v1alpha1.AddToScheme(clientgoscheme.Scheme); err != nil {
		panic(fmt.Sprintf("hotcert-controller: %v", err))
	}
}

// NewCommand returns the hotcert-controller command, printing to stdout and
// logging to stderr.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	opts := options.New()
	var logFlags cli.LogFlags
	cmd := &cobra.Command{
		Use:   "hotcert-controller",
		Short: "Roll Deployments, StatefulSets and DaemonSets when the Secrets and ConfigMaps they consume change",
		Long: `hotcert-controller runs the rollout controller. A Deployment, StatefulSet or
DaemonSet annotated hotcert.dev/rollout-on-change: "true" is rolled when a key it
consumes (volumes, projected sources, env, envFrom) changes: the controller stamps
the hash of the consumed keys on the pod template (hotcert.dev/config-hash).

Opting a workload in restarts nothing. A missing Secret or key, or TLS content that
does not parse or whose key does not match its certificate, is never rolled out; a
certificate that is not valid yet is rolled out when it becomes valid. Rollouts are
spaced by --min-interval per workload, wait for the previous rollout to finish, and
are capped by --max-rollouts-per-minute; all of this state lives in the workloads'
annotations, so it survives restarts and leader changes.

Outside a cluster (--kubeconfig), the leader election Lease goes to the kubeconfig
context's namespace; if the context names none, leader election is off.

See docs/rollout-controller.md.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			logger, err := logFlags.Logger(stderr)
			if err != nil {
				return err
			}
			log := logr.FromSlogHandler(logger.Handler())
			ctrl.SetLogger(log)
			klog.SetLogger(log)
			cfg, err := opts.Complete(log)
			if err != nil {
				return err
			}
			return Run(cmd.Context(), cfg, log)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	logFlags.AddFlags(cmd.Flags())
	opts.AddFlags(cmd.Flags())
	cli.SetVersion(cmd)
	cli.SuggestFlags(cmd) // "unknown flag: --kubconfig (did you mean --kubeconfig?)"
	return cmd
}

// Run runs the rollout controller that cfg describes until ctx is done. An API
// server that cannot be reached is the first error; a stop (ctx done) releases
// the leader election Lease and logs no error.
func Run(ctx context.Context, cfg *options.Config, logger logr.Logger) error {
	ctl, err := controller.New(cfg.Controller)
	if err != nil {
		return err
	}
	if err := reachable(cfg.REST, cfg.RESTFrom); err != nil {
		return err
	}
	mo := cfg.Manager
	mo.Logger = cleanStopLogger(ctx, logger)
	mo.Cache = ctl.CacheOptions()
	mo.NewCache = ctl.NewCache
	mo.Client = ctl.ClientOptions()
	var cen *census.Census
	if cfg.Census != nil {
		if cen, err = census.New(*cfg.Census); err != nil {
			return err
		}
		mo.Cache = cen.CacheOptions(mo.Cache)
		mo.Scheme = clientgoscheme.Scheme // with the TrustRotation types (init)
	}
	mgr, err := ctrl.NewManager(cfg.REST, mo)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := ctl.SetupWithManager(mgr); err != nil {
		return err
	}
	if cen != nil {
		if err := cen.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", func(*http.Request) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches are not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	if cfg.Manager.LeaderElection && elected(mgr) {
		// Start returns after client-go released the Lease (LeaderElectionReleaseOnCancel).
		logger.Info(releasedMsg)
	}
	return nil
}

// elected reports whether the manager was ever the leader.
func elected(mgr ctrl.Manager) bool {
	select {
	case <-mgr.Elected():
		return true
	default:
		return false
	}
}
