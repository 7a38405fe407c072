// Package chain follows chains of references from a Secret or ConfigMap to the
// workloads that consume it through custom resources: Secret → ModelConfig →
// Agent → Deployment, in kagent's case.
//
// For operator authors, [MapThrough] maps an event on a Secret or ConfigMap,
// through field indexes (rollout.RefIndexer) on each kind of the chain, to the
// objects the operator reconciles, never listing every object per event; the
// operator then hashes only the keys it consumes (rollout.Compute over
// rollout.PodSpecRefs of the pod template it builds) and stamps its pod
// template (rollout.Stamp). examples/kagent-operator is a complete operator
// built that way.
package chain
