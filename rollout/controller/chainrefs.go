package controller

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
)

// chainRefs adds to refs, the pod spec's references of a workload of namespace
// ns, what the chains of custom resources that run it consume, and returns the
// problems of those chains: links named but missing, objects in namespaces the
// controller does not watch (it would never see them change), and objects of
// another namespace when the hashes are not keyed.
//
// The last is a guard against a confused deputy: the controller reads Secrets
// everywhere, and a chain that crosses namespaces (a rule with format
// NamespacedName) would otherwise put plain SHA-256 digests of another
// namespace's Secret values on this namespace's workloads, readable by anyone
// who can read them, and guessable for low-entropy values. With a hash key
// (--hash-key-file) the digests are HMACs and reveal only when a value
// changed.
func (r *reconciler) chainRefs(ns string, refs rollout.Refs, cons *referencerules.Consumption) (rollout.Refs, []rollout.Problem) {
	problems := slices.Clone(cons.Missing)
	var foreign rollout.Refs
	for _, other := range slices.Sorted(maps.Keys(cons.Refs)) {
		if other == ns {
			continue
		}
		for _, ref := range cons.Refs[other] {
			if len(r.namespaces) > 0 && !slices.Contains(r.namespaces, other) {
				problems = append(problems, rollout.Problem{
					Kind: ref.Kind, Name: naming.Foreign(other, ref.Name), Reason: rollout.ReasonOutOfScope,
					Detail: fmt.Sprintf("%s %s/%s (%s) is in a namespace this controller does not watch",
						ref.Kind, other, ref.Name, firstUse(ref)),
				})
				continue
			}
			if r.opts.HashKey == nil {
				problems = append(problems, rollout.Problem{
					Kind: ref.Kind, Name: naming.Foreign(other, ref.Name), Reason: rollout.ReasonCrossNamespace,
					Detail: fmt.Sprintf("%s %s/%s (%s) is in another namespace: following it needs a hash key (--hash-key-file), so that no plain digest of its values appears on workloads of namespace %s",
						ref.Kind, other, ref.Name, firstUse(ref), ns),
				})
				continue
			}
			ref.Name = naming.Foreign(other, ref.Name)
			foreign = append(foreign, ref)
		}
	}
	return refs.Merge(cons.Refs[ns]).Merge(foreign), problems
}

func firstUse(ref rollout.Ref) string {
	if len(ref.Uses) == 0 {
		return "named by a chain"
	}
	return "named by " + ref.Uses[0]
}
