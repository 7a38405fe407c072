// Package chain is for operator authors whose custom resources consume Secrets
// and ConfigMaps through other custom resources: Secret → ModelConfig → Agent
// → Deployment, in kagent's case.
//
// [MapThrough] maps an event on a Secret or ConfigMap, through field indexes
// (rollout.RefIndexer) on each kind of the chain, to the objects the operator
// reconciles; the operator then hashes only the keys it consumes
// (rollout.Compute over rollout.PodSpecRefs of the pod template it builds) and
// stamps its pod template (rollout.Stamp). Because the owner writes the stamp
// itself, there is one writer of the pod template and nothing can ping-pong.
// examples/kagent-operator is a complete operator built that way.
//
// Without changing the operator, a cluster admin declares the chain with
// hotcert.dev/v1alpha1 ReferenceRules (rollout/api/v1alpha1), which the rollout
// controller (rollout/controller, Options.ReferenceRules) follows. An owner
// controller that rewrites its workload's pod template on every reconcile would
// remove the rollout controller's stamp: package webhook is a mutating
// admission webhook that keeps it.
package chain
