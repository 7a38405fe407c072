package prometheus

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// ruleFiles are the rule files, each with its unit tests: the default rules
// and the opt-in absolute expiry thresholds.
var ruleFiles = []struct{ rules, tests string }{
	{"hotcert-alerts.yaml", "hotcert-alerts_test.yaml"},
	{"hotcert-alerts-absolute.yaml", "hotcert-alerts-absolute_test.yaml"},
}

// RuleGroups is a Prometheus rule file.
type RuleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// promtool returns the path of promtool, failing the test (never skipping
// it) when it is not installed.
func promtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found on PATH: install Debian's prometheus package (apt-get install -y prometheus), as .ci/run does")
	}
	return p
}

// TestAlertRules checks the rule files with promtool and runs their unit
// tests (promtool test rules).
func TestAlertRules(t *testing.T) {
	p := promtool(t)
	for _, f := range ruleFiles {
		for _, args := range [][]string{{"check", "rules", f.rules}, {"test", "rules", f.tests}} {
			out, err := exec.Command(p, args...).CombinedOutput()
			if err != nil {
				t.Errorf("promtool %v: %v\n%s", args, err, out)
			}
		}
	}
}

// TestEveryAlertIsTested checks that each alert has a unit test in which it
// fires, and names series, and labels, the code exports; and that no alert
// name is used twice, in one file or across them (a user loads both).
func TestEveryAlertIsTested(t *testing.T) {
	exported := exportedSeries(t)
	seen := map[string]string{}
	for _, f := range ruleFiles {
		rules := readYAML[RuleGroups](t, f.rules)
		tests := readYAML[struct {
			RuleFiles []string `json:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}](t, f.tests)
		if !slices.Equal(tests.RuleFiles, []string{f.rules}) {
			t.Errorf("%s tests %v, want [%s]", f.tests, tests.RuleFiles, f.rules)
		}
		var firing []string
		for _, tc := range tests.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing = append(firing, a.Alertname)
				}
			}
		}
		n := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				n++
				if other, dup := seen[r.Alert]; dup {
					t.Errorf("alert %s is in %s and %s", r.Alert, other, f.rules)
				}
				seen[r.Alert] = f.rules
				if !slices.Contains(firing, r.Alert) {
					t.Errorf("alert %s: no unit test in %s expects it to fire", r.Alert, f.tests)
				}
				for _, problem := range checkNames(r.Expr, exported) {
					t.Errorf("alert %s: %s", r.Alert, problem)
				}
			}
		}
		if n == 0 {
			t.Fatalf("no alerts in %s", f.rules)
		}
	}
}

func readYAML[T any](t testing.TB, path string) T {
	t.Helper()
	var v T
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
