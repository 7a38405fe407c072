package prometheus

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"
)

type dashboard struct {
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Type    string `json:"type"`
		GridPos struct {
			X int `json:"x"`
			Y int `json:"y"`
			W int `json:"w"`
			H int `json:"h"`
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// TestDashboardNamesExportedSeries parses every expression of the Grafana
// dashboard (its panels' queries and its variables' label_values queries)
// and checks each names series, and labels, that hotcert's code registers.
func TestDashboardNamesExportedSeries(t *testing.T) {
	raw, err := os.ReadFile("hotcert-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("hotcert-dashboard.json: %v", err)
	}
	exported := exportedSeries(t)
	var used []string
	n := 0
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			n++
			expr := grafanaVariables.Replace(q.Expr)
			for _, problem := range checkNames(expr, exported) {
				t.Errorf("panel %q: %s: %s", p.Title, q.Expr, problem)
			}
			used = append(used, expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-z_:]+), *([a-z_]+)\)$`)
	for _, v := range d.Templating.List {
		if v.Definition == "" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(series, label)", v.Name, v.Definition)
			continue
		}
		if ls, ok := exported[m[1]]; !ok || !slices.Contains(ls, m[2]) {
			t.Errorf("variable %s: series %s with label %s is not exported", v.Name, m[1], m[2])
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no queries")
	}
	// Every series the code exports has a panel.
	for name := range exported {
		if !slices.ContainsFunc(used, func(e string) bool { return regexp.MustCompile(`\b` + name + `\b`).MatchString(e) }) {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// TestDashboardPanelsAreDistinct checks that no two panels share an id (Grafana
// keys panels, links and saved views by it) or overlap on the grid: rows added
// by separate changes must not land on one another.
func TestDashboardPanelsAreDistinct(t *testing.T) {
	raw, err := os.ReadFile("hotcert-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("hotcert-dashboard.json: %v", err)
	}
	ids := map[int]string{}
	for i, p := range d.Panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		a := p.GridPos
		for _, q := range d.Panels[:i] {
			b := q.GridPos
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("panels %q and %q overlap on the grid", q.Title, p.Title)
			}
		}
	}
}
