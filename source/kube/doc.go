// Package kube holds [hotcert.Source]s that read TLS material from the Kubernetes
// API: one Secret (a kubernetes.io/tls Secret: tls.crt, tls.key, optional ca.crt),
// one ConfigMap (a CA bundle, e.g. a trust-manager Bundle target), or
// ClusterTrustBundles.
//
// Each source runs an informer restricted by a metadata.name field selector to its one
// object, so the process caches nothing else — not the other Secrets of the namespace,
// not Helm's release Secrets — and needs only get/list/watch on that one name:
//
//	rules:
//	- apiGroups: [""]
//	  resources: ["secrets"]
//	  resourceNames: ["api-tls"]
//	  verbs: ["get", "list", "watch"]
//
// Until the informer runs (before hotcert.Reloader.Start), Read fetches the object with
// one GET, so the first load works and fails fast. Informer resyncs and updates that
// do not touch the consumed keys cost one hash comparison in the Reloader: no reload,
// no log line, no metric. A deleted object keeps the last good material serving (and
// is reported once); a recreated one is loaded. When the watch breaks or the API server
// restarts, the informer re-lists, so a change made in between is not lost. When it
// cannot list or watch any more (access revoked, API server unreachable), reads stop
// trusting the cache and GET the object: the reloader's poll then serves the current
// data, or reports the refusal once (log line, failure metric, Status) while the last
// good material keeps serving. A refusal is reported only once it has lasted the
// refusal grace ([DefaultRefusalGrace], measured from the first refused read): a
// restarting API server refuses reads for a moment while its authorizer warms up,
// and that is no failure. Until then, reads return the last answer. The sources say
// when their watch is lost and when it is back, once each, through the logger of the
// Reloader they run under (they implement hotcert.SourceLogger) unless [WithLogger]
// gave them one. An empty ca.crt in a Secret is no bundle (refused
// only with hotcert.WithRequireTrust).
//
// [Keys] is the same mechanism for any data keys of one object: package
// jwtkeys/jwtkube reads JWT keys from a Secret with it.
//
// [ClusterTrustBundles] is a trust source over ClusterTrustBundles
// (certificates.k8s.io/v1): one by name, or the union of a signer's bundles that
// match a label selector, as the kubelet's clusterTrustBundle projection builds it.
//
// Combine identity and trust from different objects with hotcert.Compose:
//
//	src := hotcert.Compose(
//		kube.NewSecret(clientset, "ns", "api-tls"),
//		kube.NewConfigMap(clientset, "ns", "agent-ca"),
//	)
package kube
