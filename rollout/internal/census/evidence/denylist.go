package evidence

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"

	"github.com/hotcert/hotcert/rollout/internal/census"
)

// DenyListQuery is the PromQL expression DenyLists sends: every target's
// <prefix>_tls_deny_list_info (the version of the list each component
// enforces) and <prefix>_tls_deny_list_denied_connections (its open
// connections that list denies). Both are one series per process component,
// whatever the number of revoked certificates or connections.
func (p Prometheus) DenyListQuery() string {
	pre := or(p.Prefix, "hotcert")
	return fmt.Sprintf(`{__name__=~"%s_tls_deny_list_info|%s_tls_deny_list_denied_connections"}`, pre, pre)
}

// DenyLists returns, by "namespace/pod", what each pod's processes report of
// the deny lists they enforce, with one instant query for every pod: one
// DenyReport per component (the two series of one component share every
// label but the name and version, whatever the process names its component
// label).
func (p Prometheus) DenyLists(ctx context.Context) (map[string][]census.DenyReport, error) {
	vec, err := p.query(ctx, p.DenyListQuery())
	if err != nil {
		return nil, err
	}
	pre := or(p.Prefix, "hotcert")
	info, denied := model.LabelValue(pre+"_tls_deny_list_info"), model.LabelValue(pre+"_tls_deny_list_denied_connections")
	type key struct{ pod, series string }
	byKey := map[key]*census.DenyReport{}
	var order []key
	p.eachPod(vec, func(pod, container string, s *model.Sample) {
		m := s.Metric
		name := m[model.MetricNameLabel]
		if name != info && name != denied {
			return
		}
		k := key{pod, identity(m)}
		d := byKey[k]
		if d == nil {
			d = &census.DenyReport{Container: container, Component: string(m["component"]), Denied: -1}
			if d.Component == "" {
				d.Component = string(m["instance"])
			}
			byKey[k] = d
			order = append(order, k)
		}
		if name == info {
			d.Version = string(m["version"])
		} else {
			d.Denied = int(s.Value)
		}
	})
	out := map[string][]census.DenyReport{}
	for _, k := range order {
		out[k.pod] = append(out[k.pod], *byKey[k])
	}
	// In an order of their own, not the response's: the census's sentences
	// name the first component not proven, and must not change between two
	// censuses that found the same.
	for _, ds := range out {
		slices.SortFunc(ds, func(a, b census.DenyReport) int {
			return cmp.Or(cmp.Compare(a.Container, b.Container), cmp.Compare(a.Component, b.Component), cmp.Compare(a.Version, b.Version))
		})
	}
	return out, nil
}

// identity is a series' labels but its name and version: what the info and
// connections series of one component share.
func identity(m model.Metric) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		if k == model.MetricNameLabel || k == "version" {
			continue
		}
		parts = append(parts, string(k)+"="+string(v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
