package deploy

import (
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/hotcert/hotcert/cmd/hotcert-controller/app/options"
)

// containerArgs parses the controller container's arguments with
// hotcert-controller's real flags and checks them as the binary does.
func containerArgs(t testing.TB, d *appsv1.Deployment) *options.Options {
	t.Helper()
	args := d.Spec.Template.Spec.Containers[0].Args
	o := options.New()
	fs := pflag.NewFlagSet("hotcert-controller", pflag.ContinueOnError)
	o.AddFlags(fs)
	fs.String("log-format", "text", "")
	fs.String("log-level", "info", "")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	return o
}
