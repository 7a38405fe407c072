// Package rollout holds the parts of hotcert's rollout controller that operator
// authors reuse for their own objects: what a pod spec consumes
// ([PodSpecRefs]), an unambiguous hash of only the consumed keys ([Compute]),
// the TLS check run before rolling ([CheckTLS]), the pod-template stamp
// ([Stamp], [Stamped], [PodTemplate]), and a field index with a map function
// from a Secret or ConfigMap to the objects that reference it ([RefIndexer],
// [MapReferrers]).
//
// The controller that wires these together for Deployments, StatefulSets and
// DaemonSets lives in rollout/controller (its rate control and recorded state
// are internal to it); examples/kagent-operator is an operator built on these
// parts (an Agent whose Deployment must roll when the Secret its ModelConfig
// references changes).
//
// # Hash
//
// The stamp written to the pod-template annotation [AnnotationConfigHash] is the
// SHA-256 of a length-prefixed encoding of every consumed (object, key) pair, in
// a canonical order, with the SHA-256 of each value: no separator can be confused
// with data, no timestamp or resourceVersion enters it (GitOps tools see a stable
// value), and a key the workload does not consume does not change it.
//
// # Time
//
// TLS content is judged at a given time with no clock-skew tolerance, as
// hotcert's reloader judges it: a certificate whose NotBefore is ahead is a
// [NotYetValidError] ([Config.NotYetValid]), to be rolled out at its NotBefore,
// never before (the pods' reloaders would refuse it) and never refused.
//
// # State
//
// Everything the controller must remember lives in annotations on the workload's
// own metadata ([AnnotationAppliedHash], [AnnotationAppliedKeys],
// [AnnotationLastRollout]; never its pod template, which would roll it): the hash
// the running pods reflect, a per-key digest record used to say which key
// changed, and the time of the last rollout. A controller restart or a leader
// change loses nothing.
package rollout
