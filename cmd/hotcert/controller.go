package main

import (
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hotcert/hotcert/rollout/controller"
)

// newControllerCommand wires `hotcert controller`: the rollout controller.
func newControllerCommand(g *globals) *cobra.Command {
	cfg := controller.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Roll Deployments, StatefulSets and DaemonSets when the Secrets and ConfigMaps they consume change",
		Long: `controller runs the rollout controller. A Deployment, StatefulSet or DaemonSet
annotated hotcert.dev/rollout-on-change: "true" is rolled when a key it consumes
(volumes, projected sources, env, envFrom) changes: the controller stamps the hash
of the consumed keys on the pod template (hotcert.dev/config-hash).

Opting a workload in restarts nothing. A missing Secret or key, or TLS content that
does not parse or whose key does not match its certificate, is never rolled out.
Rollouts are spaced by --min-interval per workload, wait for the previous rollout
to finish, and are capped by --max-rollouts-per-minute; all of this state lives in
the workloads' annotations, so it survives restarts and leader changes.

See docs/rollout-controller.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			logger, err := g.logger()
			if err != nil {
				return err
			}
			log := logr.FromSlogHandler(logger.Handler())
			ctrl.SetLogger(log)
			klog.SetLogger(log)
			return controller.Run(cmd.Context(), cfg, log)
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}
