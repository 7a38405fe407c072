package progress

import (
	"strings"
	"testing"
)

// Argo Rollouts' own notion of done, as a rule for a Rollout would write it.
const argoReady = `has(self.status) && has(self.status.phase) && self.status.phase != 'Progressing' && self.status.observedGeneration == string(self.metadata.generation)`

func TestReadinessJudgesTheObjectAsWritten(t *testing.T) {
	r, err := CompileReadiness(argoReady)
	if err != nil {
		t.Fatal(err)
	}
	obj := func(phase, observed string) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"generation": int64(3)},
			"status":   map[string]any{"phase": phase, "observedGeneration": observed},
		}
	}
	cases := []struct {
		name string
		obj  map[string]any
		done bool
		why  string
	}{
		{"healthy", obj("Healthy", "3"), true, ""},
		{"progressing", obj("Progressing", "3"), false, "is false"},
		{"not observed yet", obj("Healthy", "2"), false, "is false"},
		{"no status", map[string]any{"metadata": map[string]any{"generation": int64(1)}}, false, "is false"},
	}
	for _, c := range cases {
		p := r.Of(c.obj)
		if p.Done != c.done || !strings.Contains(p.Detail, c.why) {
			t.Errorf("%s: %+v, want done=%v with %q", c.name, p, c.done, c.why)
		}
	}
}

func TestReadinessThatFailsIsNotDone(t *testing.T) {
	r, err := CompileReadiness(`self.status.phase == 'Healthy'`)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Of(map[string]any{"metadata": map[string]any{}})
	if p.Done || !strings.Contains(p.Detail, "fails") || !strings.Contains(p.Detail, "status") {
		t.Fatalf("%+v: want not done, saying the expression fails on status", p)
	}
}

func TestBadReadinessExpressionsAreRefused(t *testing.T) {
	for expr, want := range map[string]string{
		`self.status.phase ==`: "Syntax error",
		`'Healthy'`:            "yields string, want bool",
		`self.nope(`:           "Syntax error",
		`undeclared == 1`:      "undeclared reference",
	} {
		if _, err := CompileReadiness(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", expr, err, want)
		}
	}
}
