package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/hotcert/hotcert/internal/kubetest"
)

var env *kubetest.Env

// crdDir holds the CRDs of cert-manager's release (Certificate, Issuer) that
// `make test` installs with trust-manager (hack/build-trust-manager.sh).
const crdDir = "../.bin/trust-manager/crds"

// TestMain starts one API server (with kube-controller-manager, so that
// Deployments get ReplicaSets) for the package, serving cert-manager's CRDs,
// against which the webhook's cert-manager objects are validated.
func TestMain(m *testing.M) {
	crds := []string{filepath.Join(crdDir, "cert-manager.io_certificates.yaml"), filepath.Join(crdDir, "cert-manager.io_issuers.yaml")}
	for _, f := range crds {
		if _, err := os.Stat(f); err != nil {
			fmt.Fprintf(os.Stderr, "cert-manager's CRDs are missing (%v): run `make trust-manager` (hack/build-trust-manager.sh .bin/trust-manager)\n", err)
			os.Exit(1)
		}
	}
	kubetest.Main(m, &env, kubetest.WithControllerManager(), kubetest.WithCRDPaths(crds...))
}

// hotcertController builds the hotcert-controller binary into a folder of
// the test's.
func hotcertController(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hotcert-controller")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/hotcert-controller")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/hotcert-controller: %v\n%s", err, out)
	}
	return bin
}

// imageRepository is the repository `make image` tags the controller's image
// with (IMAGE_REPO), its tag being the chart's appVersion (VERSION).
const imageRepository = "hotcert.local/hotcert-controller"

// controllerImage is the image the manifests must run: what `make image`
// builds and tags, for `kind load image-archive` or a registry of one's own.
func controllerImage(t testing.TB) string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.AppVersion == "" {
		t.Fatal("the chart has no appVersion, the image's tag")
	}
	return imageRepository + ":" + ch.Metadata.AppVersion
}
