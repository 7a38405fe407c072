package trustmanager

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

var env *kubetest.Env

// binDir is where `make test` builds trust-manager and installs its Bundle
// CRD (hack/build-trust-manager.sh).
const binDir = "../../.bin/trust-manager"

func TestMain(m *testing.M) {
	crd := filepath.Join(binDir, "crds", "trust.cert-manager.io_bundles.yaml")
	for _, f := range []string{filepath.Join(binDir, "trust-manager"), crd} {
		if _, err := os.Stat(f); err != nil {
			fmt.Fprintf(os.Stderr, "trust-manager is not built (%v): run `make trust-manager` (hack/build-trust-manager.sh .bin/trust-manager)\n", err)
			os.Exit(1)
		}
	}
	// The TrustRotation CRD and types too, for the census test.
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	kubetest.Main(m, &env, kubetest.WithScheme(s), kubetest.WithCRDPaths(crd, "../../rollout/api/v1alpha1/crd"))
}
