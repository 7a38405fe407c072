// Package hotcert holds the TLS material a process serves and trusts, and swaps it
// when its source changes without ever swapping in something broken.
//
// The pieces, in the order data flows through them:
//
//   - A [Source] reads raw [Content] (certificate chain, private key, CA bundle) from
//     files, a Kubernetes Secret or ConfigMap, or a [Compose] of two sources, and says
//     when that content may have changed.
//   - [Validate] turns Content into an immutable, pre-parsed [Material], or returns an
//     [*Error] that names the input and what is wrong with it. hotcert check runs the
//     very same function.
//   - A [Reloader] loads the first Material (failing fast), then re-reads its source on
//     every change notification and every poll tick, deduplicates by SHA-256 of the
//     content, validates, and swaps the new Material into its [Store] only when it is
//     good. Bad content keeps the last good Material serving, and is logged and counted
//     once.
//   - A [Store] publishes the current Material behind an atomic pointer: reading it on
//     the TLS handshake path takes no lock and allocates nothing. Subscribers are
//     notified of changes, coalesced.
//
// Wiring into crypto/tls, gRPC and HTTP lives in the tlsconfig, grpccreds and httptls
// packages, graceful reconnect after a rotation in drain, Prometheus metrics in metrics,
// files (Secret volumes, pod certificates) in source/file; all of them are this module,
// which depends on no Kubernetes or JWT library. Sources with heavier dependencies are
// modules of their own: source/kube (Secrets, ConfigMaps, ClusterTrustBundles through the
// API) and source/spiffe (the SPIFFE Workload API).
package hotcert
