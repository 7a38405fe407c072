// Command hotcert-controller is hotcert's rollout controller: it rolls the
// Deployments, StatefulSets and DaemonSets that cannot hot-reload when a Secret or
// ConfigMap key they consume changes. It is a binary of its own so that the
// hotcert CLI (demo, server, agent, inspect, check) links no Kubernetes client.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hotcert/hotcert/cmd/internal/cli"
	"github.com/hotcert/hotcert/rollout/controller"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hotcert-controller:", err)
		os.Exit(1)
	}
}

func newCommand(stdout, stderr io.Writer) *cobra.Command {
	cfg := controller.DefaultConfig()
	var logFlags cli.LogFlags
	cmd := &cobra.Command{
		Use:     "hotcert-controller",
		Short:   "Roll Deployments, StatefulSets and DaemonSets when the Secrets and ConfigMaps they consume change",
		Version: cli.Version(),
		Long: `hotcert-controller runs the rollout controller. A Deployment, StatefulSet or
DaemonSet annotated hotcert.dev/rollout-on-change: "true" is rolled when a key it
consumes (volumes, projected sources, env, envFrom) changes: the controller stamps
the hash of the consumed keys on the pod template (hotcert.dev/config-hash).

Opting a workload in restarts nothing. A missing Secret or key, or TLS content that
does not parse or whose key does not match its certificate, is never rolled out.
Rollouts are spaced by --min-interval per workload, wait for the previous rollout
to finish, and are capped by --max-rollouts-per-minute; all of this state lives in
the workloads' annotations, so it survives restarts and leader changes.

See docs/rollout-controller.md.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			logger, err := logFlags.Logger(stderr)
			if err != nil {
				return err
			}
			log := logr.FromSlogHandler(logger.Handler())
			ctrl.SetLogger(log)
			klog.SetLogger(log)
			return controller.Run(cmd.Context(), cfg, log)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	logFlags.AddFlags(cmd.Flags())
	cfg.AddFlags(cmd.Flags())
	return cmd
}
