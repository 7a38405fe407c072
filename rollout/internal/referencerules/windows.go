package referencerules

import (
	"strings"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// ruleWindows are the rollout windows of one rule, in the annotation's text
// form (see package rollout/internal/window).
type ruleWindows struct {
	rule, text string
	declares   bool // the rule declares its target a workload kind
}

// setWindows records the rollout windows of rules, by target ("group/Kind").
func (l *Live) setWindows(rules []v1alpha1.ReferenceRule) {
	m := map[string]ruleWindows{}
	for _, r := range rules {
		if len(r.Spec.RolloutWindows) == 0 {
			continue
		}
		parts := make([]string, len(r.Spec.RolloutWindows))
		for i, w := range r.Spec.RolloutWindows {
			parts[i] = w.String()
		}
		gk := r.Spec.Target.Group + "/" + r.Spec.Target.Kind
		m[gk] = ruleWindows{rule: r.Name, text: strings.Join(parts, "; "), declares: r.Spec.Rollout != nil}
	}
	l.windows.Store(&m)
}

// Windows returns the rollout windows that a ReferenceRule declares for a
// workload, and the rule's name ("" when none does): for an object of a
// declared kind (gk, "group/Kind"), its rule's; else the first rule with
// windows along the chain that reaches it (via, as Consumption.Via lists it).
func (l *Live) Windows(gk string, declared bool, via []string) (text, rule string) {
	p := l.windows.Load()
	if p == nil {
		return "", ""
	}
	if w, ok := (*p)[gk]; ok && declared && w.declares {
		return w.text, w.rule
	}
	for _, v := range via {
		kind, _, _ := strings.Cut(v, " ")
		if w, ok := (*p)[kind]; ok {
			return w.text, w.rule
		}
	}
	return "", ""
}
