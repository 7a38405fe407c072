// Command kagent-operator runs the example operator against the cluster of the
// current kubeconfig (install config/crd first).
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hotcert/hotcert/examples/kagent-operator/api/v1alpha2"
	"github.com/hotcert/hotcert/examples/kagent-operator/operator"
)

func main() {
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kagent-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return err
	}
	if err := v1alpha2.AddToScheme(s); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s})
	if err != nil {
		return err
	}
	if err := (&operator.Reconciler{}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
