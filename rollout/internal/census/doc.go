// Package census decides, for a CA rotation (a hotcert.dev/v1alpha1
// TrustRotation), what every consumer of its trust objects and server
// certificates holds and how that is known, and where the three-step rotation
// stands. It is pure: it reads no cluster and dials nothing. The controller
// gathers the inputs — the objects and what they hold, the pods and their
// containers' start times, what hotcert processes report (Prometheus or a
// scrape), what a handshake to each serving endpoint shows — and writes the
// result into the TrustRotation's status.
//
// A consumer is one container's use of one object. What it holds is a fact
// per question the rotation asks of it (does it trust the new CA? still the
// old one? does it serve a leaf of the new CA?), each with its evidence:
//
//   - reported: its process runs hotcert and reports what it holds;
//   - served: a TLS handshake to it shows the leaf it serves;
//   - restarted: it read the object at start, and its container started at
//     least the kubelet's propagation delay after the census saw the object
//     change (never the object's own update time: the census can only vouch
//     for what it saw);
//   - never: it consumes through subPath or env, which the kubelet never
//     updates, and started before the change could reach it;
//   - unknown: anything else, named.
//
// Only the first three prove anything; a step is done when every consumer's
// fact is proven (or a person acknowledged it). Nothing else is inferred: a
// consumer that reports nothing and started before the change may reload its
// file or may not, so it is unknown, not old.
package census
