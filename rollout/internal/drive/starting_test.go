package drive

import (
	"strings"
	"testing"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestStartingContainersHoldADoneStep: a done step the census no longer
// proves only because containers have not started (the new pods of the
// rotation's own roll) holds the rotation, writing nothing, instead of
// stopping it; once they run and are proven it goes on; if they run and
// undo the step, it stops.
func TestStartingContainersHoldADoneStep(t *testing.T) {
	w := newWorld(t, external)
	w.passAdd()
	w.set(v1alpha1.StepAddNewCA, false, "1/2 consumers proven to trust CA-2026: pod app/legacy-2: its container is not running")
	w.starting = map[string]bool{v1alpha1.StepAddNewCA: true}
	before := len(w.writes)
	for range 3 {
		w.decide()
		if w.phase() != v1alpha1.PhaseWaiting || !strings.Contains(w.prev.Message, "waiting for containers to start: step add-new-ca") {
			t.Fatalf("phase %s, message %q", w.phase(), w.prev.Message)
		}
	}
	if len(w.writes) != before || step(w.prev, v1alpha1.StepSwitchServerCert).Started != nil {
		t.Fatalf("a held rotation moved: writes %v, steps %+v", w.writes[before:], w.prev.Steps)
	}

	// They run, proven: the rotation goes on.
	w.starting = nil
	w.set(v1alpha1.StepAddNewCA, true, "")
	if w.decide(); step(w.prev, v1alpha1.StepSwitchServerCert).Started == nil {
		t.Fatalf("not resumed: phase %s, message %q", w.phase(), w.prev.Message)
	}

	// They run and do not trust the new CA: it stops.
	w.set(v1alpha1.StepAddNewCA, false, "pod app/legacy-2 does not trust CA-2026")
	if w.decide(); w.phase() != v1alpha1.PhaseStopped {
		t.Fatalf("phase %s, message %q", w.phase(), w.prev.Message)
	}
}
