package referencerules

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestRuleWindows: the windows of a rule apply to the objects of the kind it
// declares a rollout target, and to workloads whose chain runs an object of
// its target kind (the first along the chain); a rule without windows, or
// an object of a kind the rule does not declare, gets none.
func TestRuleWindows(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 27, 22, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(time.Hour))
	l := &Live{}
	if text, rule := l.Windows("kagent.dev/Agent", false, []string{"kagent.dev/Agent ns/a"}); text != "" || rule != "" {
		t.Fatal("windows before any rule")
	}
	l.setWindows([]v1alpha1.ReferenceRule{
		{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: v1alpha1.ReferenceRuleSpec{
			Target:         v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "Agent"},
			RolloutWindows: []v1alpha1.RolloutWindow{{Schedule: "CRON_TZ=Europe/Berlin 0 2 * * SAT", Duration: "4h"}, {Start: &start, End: &end}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "modelconfig"}, Spec: v1alpha1.ReferenceRuleSpec{
			Target: v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "ModelConfig"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "rollouts"}, Spec: v1alpha1.ReferenceRuleSpec{
			Target:         v1alpha1.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"},
			Rollout:        &v1alpha1.RolloutTarget{PodTemplate: "spec.template"},
			RolloutWindows: []v1alpha1.RolloutWindow{{Schedule: "@daily", Duration: "1h"}}}},
	})
	for _, c := range []struct {
		gk         string
		declared   bool
		via        []string
		text, rule string
	}{
		{"apps/Deployment", false, []string{"kagent.dev/ModelConfig ns/m", "kagent.dev/Agent ns/a"}, "CRON_TZ=Europe/Berlin 0 2 * * SAT for 4h; 2026-12-27T22:00:00Z/2026-12-27T23:00:00Z", "agent"},
		{"apps/Deployment", false, []string{"kagent.dev/ModelConfig ns/m"}, "", ""},
		{"argoproj.io/Rollout", true, nil, "@daily for 1h", "rollouts"},
		{"kagent.dev/Agent", true, nil, "", ""}, // the Agent rule declares no rollout target
		{"apps/Deployment", false, nil, "", ""},
	} {
		text, rule := l.Windows(c.gk, c.declared, c.via)
		if text != c.text || rule != c.rule {
			t.Errorf("%s %v: %q from %q, want %q from %q", c.gk, c.via, text, rule, c.text, c.rule)
		}
	}
}
