// Package chain follows chains of references from a Secret or ConfigMap to the
// workloads that consume it through custom resources: Secret → ModelConfig →
// Agent → Deployment, in kagent's case.
//
// # Without changing the operator: ReferenceRules
//
// [Compile] turns hotcert.dev/v1alpha1 ReferenceRules (rollout/api/v1alpha1)
// into a [Graph]; a [Resolver] runs dynamic informers for exactly the kinds the
// graph names (and the workload kinds its rules use), indexed so that both
// directions are lookups, never a listing per event:
//
//   - [Resolver.WorkloadsOf]: a Secret or ConfigMap → the objects naming it →
//     the objects naming those → … → the workloads they run (owner reference,
//     label selector or name rule);
//   - [Resolver.Consumed]: a workload → the (object, key) pairs it consumes
//     through every chain, as rollout.Refs ready for rollout.Compute, and the
//     objects of the chain that are named but missing (nothing must roll then);
//   - [Resolver.OnChange]: a custom resource added, changed or deleted → the
//     workloads to look at again (an Agent pointed at another ModelConfig).
//
// [Live] keeps a Resolver in step with the cluster's ReferenceRules (a
// manager.Runnable), and adapts it to controller-runtime: [Live.MapData] maps a
// Secret or ConfigMap event to workloads, [Live.Source] enqueues the workloads
// a custom-resource change reaches, and [MergeRefs] merges what the chains
// consume with what the pod spec consumes, for rollout.Compute; [StatusWriter]
// writes each rule's Ready condition from Live's results. The rollout
// controller (rollout/controller, Options.ReferenceRules) is built this way.
//
// # Coexisting with the owner controller
//
// An owner controller that rewrites its workload's pod template on every
// reconcile removes the rollout controller's stamp, and the two ping-pong.
// Package webhook is a mutating admission webhook that keeps the stamp.
//
// # Inside an operator: MapThrough
//
// For operator authors, [MapThrough] maps an event on a Secret or ConfigMap,
// through field indexes (rollout.RefIndexer) on each kind of the chain, to the
// objects the operator reconciles; the operator then hashes only the keys it
// consumes (rollout.Compute over rollout.PodSpecRefs of the pod template it
// builds) and stamps its pod template (rollout.Stamp). Because the owner writes
// the stamp itself, there is one writer of the pod template and nothing can
// ping-pong. examples/kagent-operator is a complete operator built that way.
package chain
