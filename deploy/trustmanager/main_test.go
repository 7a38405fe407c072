package trustmanager

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hotcert/hotcert/internal/kubetest"
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
	kubetest.Main(m, &env, kubetest.WithCRDPaths(crd))
}
