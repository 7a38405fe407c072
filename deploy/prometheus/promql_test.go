package prometheus

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// checkNames parses expr with Prometheus's PromQL parser and returns what in
// it is not exported: a series no code registers, or a label (in a selector or
// a grouping) that none of the series the expression selects has.
func checkNames(expr string, exported map[string][]string) []string {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	known := map[string]bool{}
	for _, l := range targetLabels {
		known[l] = true
	}
	var selected int
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		selected++
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		ls, ok := exported[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("series %q is not exported", name))
			return nil
		}
		for _, l := range ls {
			known[l] = true
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName && !slices.Contains(ls, m.Name) && !slices.Contains(targetLabels, m.Name) {
				problems = append(problems, fmt.Sprintf("series %q has no label %q", name, m.Name))
			}
		}
		return nil
	})
	if selected == 0 {
		problems = append(problems, "selects no series")
	}
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		if a, ok := n.(*parser.AggregateExpr); ok {
			for _, l := range a.Grouping {
				if !known[l] {
					problems = append(problems, fmt.Sprintf("groups by %q, a label none of its series has", l))
				}
			}
		}
		return nil
	})
	return problems
}

// grafanaVariables stands in for the dashboard's variables, so that its
// expressions parse as Prometheus receives them.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$component", ".*")
