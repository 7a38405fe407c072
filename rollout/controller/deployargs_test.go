package controller

// Config is what the manifest tests (deploy_test.go) read of a controller
// container's arguments, parsed by ParseArgs with hotcert-controller's real
// flags (package cmd/hotcert-controller/app/options). That package imports
// this one, so only an external test file can call it: deployargs_ext_test.go
// sets ParseArgs.
type Config struct {
	DryRun, ReferenceRules, LeaderElect bool
	Namespaces                          []string
	HashKeyFile, LeaderElectionID       string
	WebhookAddr                         string
	WebhookCertFile, WebhookKeyFile     string
	Webhook                             bool // the webhook is served
}

func (c Config) webhookEnabled() bool { return c.Webhook }

// ParseArgs parses and validates a controller container's arguments.
var ParseArgs func(args []string) (Config, error)
