package rotation

import (
	"slices"
	"testing"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestStepNamesMatchTheTrustRotation: `rotation status` and the TrustRotation's
// step conditions name the steps alike (docs/rotation.md, docs/census.md),
// so a pipeline gates on one name with either. Only this test links the API
// types; the hotcert binary does not.
func TestStepNamesMatchTheTrustRotation(t *testing.T) {
	census := []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA}
	if !slices.Equal(Steps(), census) {
		t.Fatalf("rotation status steps %v, TrustRotation conditions %v", Steps(), census)
	}
}
