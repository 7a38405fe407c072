package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestCRDCopiesAreTheAPI checks that the ReferenceRule CRD copies in the
// kustomize base and the chart are the one the API package embeds.
func TestCRDCopiesAreTheAPI(t *testing.T) {
	for _, p := range []string{
		filepath.Join(kustomizeDir, "base", "hotcert.dev_referencerules.yaml"),
		filepath.Join(chartDir, "crds", "hotcert.dev_referencerules.yaml"),
	} {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v1alpha1.CRDYAML) {
			t.Errorf("%s differs from rollout/api/v1alpha1/crd/hotcert.dev_referencerules.yaml: copy it", p)
		}
	}
}
