package controller_test

import (
	"github.com/spf13/pflag"

	"github.com/hotcert/hotcert/cmd/hotcert-controller/app/options"
	"github.com/hotcert/hotcert/rollout/controller"
)

func init() {
	controller.ParseArgs = func(args []string) (controller.Config, error) {
		o := options.New()
		fs := pflag.NewFlagSet("hotcert-controller", pflag.ContinueOnError)
		o.AddFlags(fs)
		fs.String("log-format", "text", "")
		fs.String("log-level", "info", "")
		if err := fs.Parse(args); err != nil {
			return controller.Config{}, err
		}
		if err := o.Validate(); err != nil {
			return controller.Config{}, err
		}
		return controller.Config{
			DryRun: o.DryRun, ReferenceRules: o.ReferenceRules, LeaderElect: o.LeaderElect,
			Namespaces: o.Namespaces, HashKeyFile: o.HashKeyFile, LeaderElectionID: o.LeaderElectionID,
			WebhookAddr: o.WebhookAddr, WebhookCertFile: o.WebhookCertFile, WebhookKeyFile: o.WebhookKeyFile,
			Webhook: o.WebhookEnabled(),
		}, nil
	}
}
