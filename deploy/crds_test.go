package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestCRDCopiesAreTheAPI checks that the CRD copies in the kustomize base
// and the chart (ReferenceRule, TrustRotation) are those the API package
// embeds.
func TestCRDCopiesAreTheAPI(t *testing.T) {
	for file, api := range map[string][]byte{
		"hotcert.dev_referencerules.yaml": v1alpha1.CRDYAML,
		"hotcert.dev_trustrotations.yaml": v1alpha1.TrustRotationCRDYAML,
	} {
		for _, p := range []string{filepath.Join(kustomizeDir, "base", file), filepath.Join(chartDir, "crds", file)} {
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, api) {
				t.Errorf("%s differs from rollout/api/v1alpha1/crd/%s: copy it", p, file)
			}
		}
	}
}
