package controller

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/chain"
)

// chainRefs adds to refs, the pod spec's references of a workload of namespace
// ns, what the chains of custom resources that run it consume, and returns the
// problems of those chains: links named but missing, and objects in namespaces
// the controller does not watch (it would never see them change).
func (r *reconciler) chainRefs(ns string, refs rollout.Refs, cons *chain.Consumption) (rollout.Refs, []rollout.Problem) {
	problems := slices.Clone(cons.Missing)
	var foreign rollout.Refs
	for _, other := range slices.Sorted(maps.Keys(cons.Refs)) {
		if other == ns {
			continue
		}
		for _, ref := range cons.Refs[other] {
			if len(r.namespaces) > 0 && !slices.Contains(r.namespaces, other) {
				problems = append(problems, rollout.Problem{
					Kind: ref.Kind, Name: rollout.ForeignName(other, ref.Name), Reason: rollout.ReasonOutOfScope,
					Detail: fmt.Sprintf("%s %s/%s (%s) is in a namespace this controller does not watch",
						ref.Kind, other, ref.Name, firstUse(ref)),
				})
				continue
			}
			ref.Name = rollout.ForeignName(other, ref.Name)
			foreign = append(foreign, ref)
		}
	}
	return chain.MergeRefs(chain.MergeRefs(refs, cons.Refs[ns]), foreign), problems
}

func firstUse(ref rollout.Ref) string {
	if len(ref.Uses) == 0 {
		return "named by a chain"
	}
	return "named by " + ref.Uses[0]
}
