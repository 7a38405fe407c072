package census

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// scope is the set of namespaces whose pods a census counts (Options.Namespaces
// and Options.NamespaceSelector), resolved at each census.
type scope struct {
	in map[string]bool // nil: every namespace
	// desc names it for the status ("" for every namespace).
	desc string
}

// scopeNow resolves the options' namespaces: the namespaces whose labels
// match the selector are listed from the API server (metadata only).
func (c *Census) scopeNow(ctx context.Context) (scope, error) {
	o := c.opts
	if len(o.Namespaces) == 0 && o.NamespaceSelector == nil {
		return scope{}, nil
	}
	in := map[string]bool{}
	var parts []string
	if len(o.Namespaces) > 0 {
		parts = append(parts, "namespaces "+strings.Join(o.Namespaces, ", "))
		for _, ns := range o.Namespaces {
			in[ns] = true
		}
	}
	if o.NamespaceSelector != nil {
		parts = append(parts, "namespaces matching "+o.NamespaceSelector.String())
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		if err := c.api.List(ctx, list, client.MatchingLabelsSelector{Selector: o.NamespaceSelector}); err != nil {
			return scope{}, fmt.Errorf("listing the namespaces matching %s: %w", o.NamespaceSelector, err)
		}
		matching := map[string]bool{}
		for _, ns := range list.Items {
			if len(o.Namespaces) == 0 || in[ns.Name] {
				matching[ns.Name] = true
			}
		}
		in = matching
	}
	names := make([]string, 0, len(in))
	for ns := range in {
		names = append(names, ns)
	}
	slices.Sort(names)
	return scope{in: in, desc: fmt.Sprintf("%s (%d: %s)", strings.Join(parts, " and "), len(names), strings.Join(names, ", "))}, nil
}

// contains reports whether the census counts the pods of namespace ns.
func (s scope) contains(ns string) bool { return s.in == nil || s.in[ns] }

// restrict applies the scope to the objects read: a ConfigMap or Secret
// named in a namespace out of scope is an error of its entry (its consumers
// cannot be counted); a trust-manager Bundle's targets out of scope are
// dropped (the Bundle is followed in the namespaces in scope), and a Bundle
// with none left is an error. trust is spec.trust.
func (s scope) restrict(states []core.State, trust []v1alpha1.TrustObject) []core.State {
	if s.in == nil {
		return states
	}
	bundle := func(st core.State) bool {
		return st.Role == core.RoleTrust && st.Origin < len(trust) && trust[st.Origin].Bundle != nil
	}
	var out []core.State
	kept := map[int]bool{}
	for _, st := range states {
		switch {
		case st.Namespace == "" || s.in[st.Namespace]:
		case bundle(st):
			continue
		default:
			st.Err = fmt.Sprintf("namespace %s is outside the census's scope, %s: its consumers cannot be counted", st.Namespace, s.desc)
		}
		kept[st.Origin] = kept[st.Origin] || bundle(st)
		out = append(out, st)
	}
	for _, st := range states {
		if bundle(st) && !kept[st.Origin] {
			kept[st.Origin] = true
			out = append(out, core.State{Object: core.Object{Kind: st.Kind, Name: st.Name, Origin: st.Origin},
				Err: fmt.Sprintf("Bundle %s targets no namespace of the census's scope, %s", st.Name, s.desc)})
		}
	}
	return out
}
