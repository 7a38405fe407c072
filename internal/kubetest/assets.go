package kubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// assetsEnv names the environment variable holding the folder of the
// Kubernetes binaries, as controller-runtime's envtest knows it.
const assetsEnv = "KUBEBUILDER_ASSETS"

// binDir is where `make k8s-bins` puts the binaries, relative to the root of
// the repository.
var binDir = filepath.Join(".bin", "k8s")

// Names of the binaries in the assets folder.
const (
	apiServerBin         = "kube-apiserver"
	etcdBin              = "etcd"
	controllerManagerBin = "kube-controller-manager"
)

// findAssets returns the folder holding the named binaries: $KUBEBUILDER_ASSETS
// when it is set, otherwise the first .bin/k8s beside a go.mod found walking
// up from the working directory.
func findAssets(bins []string) (string, error) {
	if dir := os.Getenv(assetsEnv); dir != "" {
		if missing := missingBins(dir, bins); len(missing) > 0 {
			return "", fmt.Errorf("kubetest: %s missing from %s=%s: run `make k8s-bins` at the repository root (or unset %s to use <repo>/.bin/k8s)",
				strings.Join(missing, ", "), assetsEnv, dir, assetsEnv)
		}
		return dir, nil
	}

	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kubetest: locating the Kubernetes binaries: %w", err)
	}
	var looked []string
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(dir, binDir)
			if len(missingBins(cand, bins)) == 0 {
				return cand, nil
			}
			looked = append(looked, cand)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if len(looked) == 0 {
		return "", errors.New("kubetest: Kubernetes binaries not found: " + assetsEnv +
			" is unset and no go.mod encloses the working directory; run `make k8s-bins` at the repository root")
	}
	return "", fmt.Errorf("kubetest: Kubernetes binaries (%s) not found in %s: run `make k8s-bins` at the repository root",
		strings.Join(bins, ", "), strings.Join(looked, ", "))
}

// missingBins returns those of bins that are not executable files in dir.
func missingBins(dir string, bins []string) []string {
	var missing []string
	for _, b := range bins {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}
