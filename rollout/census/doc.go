// Package census is hotcert's census controller: for each TrustRotation
// (hotcert.dev/v1alpha1) it keeps, in the resource's status, the census of
// every pod consuming the rotation's trust objects and server certificates —
// how each consumes them, what it holds and how that is known (reported,
// served, restarted, never, unknown) — and one condition per step of the
// three-step rotation, so that `kubectl wait --for=condition=add-new-ca`
// gates a pipeline. In mode Observe it writes nothing but that status and
// Events on the TrustRotation.
//
// hotcert-controller runs it beside the rollout controller (--census); run it
// in a manager of your own:
//
//	c, err := census.New(census.Options{})
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Cache: c.CacheOptions(cache.Options{})})
//	err = c.SetupWithManager(mgr)
//
// What it keeps in memory: of each running pod, a record of what the census reads
// (its name, labels, the volumes, mounts and env references that can name
// Secrets, ConfigMaps, ClusterTrustBundles or pod certificates — never an env
// value —, its container ports, IP and containers' start times), the spec
// and labels shared by the pods that have them alike, as the pods of one
// ReplicaSet do (pods.go; about 160 bytes a pod with its index entry: the
// census lists and watches pods with reflectors of its own, podfeed.go, and
// the manager's cache holds none); of each EndpointSlice, its
// endpoints' addresses, readiness and target pods, and its ports; of each
// object a rotation reads, its metadata (a name-selected watch that wakes the
// rotation when it changes, triggers.go). Trust objects' data is read from
// the API server at each census (one GET each), never cached. The judgement itself is package rollout/internal/census; the
// evidence (Prometheus, scrapes, handshakes) is gathered by
// rollout/internal/census/evidence.
package census
