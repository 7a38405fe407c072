// Package referencerules follows hotcert.dev/v1alpha1 ReferenceRules for the
// rollout controller: chains of references from a Secret or ConfigMap to the
// workloads that consume it through custom resources (Secret → ModelConfig →
// Agent → Deployment, in kagent's case).
//
// [Compile] turns ReferenceRules into a [Graph]; a [Resolver] runs dynamic
// informers for exactly the kinds the graph names (and the workload kinds its
// rules use), indexed so that both directions are lookups, never a listing per
// event:
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
// manager.Runnable; without the ReferenceRule CRD it waits for it), and adapts
// it to controller-runtime: [Live.MapData] maps a Secret or ConfigMap event to
// workloads, [Live.Source] enqueues the workloads a custom-resource change
// reaches, and [StatusWriter] writes each rule's Ready condition from Live's
// results. What the chains consume is merged with what the pod spec consumes
// by [rollout.Refs.Merge].
package referencerules
