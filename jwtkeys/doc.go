// Package jwtkeys holds the keys a process signs and verifies JWTs with, and rotates
// them with a grace period: tokens already issued keep verifying after the signing
// key changed, until they have expired.
//
// A [KeySet] reads its keys from a [Source] — a kubelet-projected directory
// (package jwtkeys/jwtfile), one Kubernetes Secret (jwtkeys/jwtkube) or memory
// ([MemorySource]) — and follows it with the same engine as hotcert.Reloader: it
// re-reads on change notifications and poll ticks, ignores content it already serves,
// validates before it swaps, keeps the last good keys when new content is bad, and
// logs and counts each distinct change or failure once.
//
// The content holds one key that signs (a PEM private key: ES256, RS256 or EdDSA, its
// algorithm pinned by its type; or an ordered list of HS256 secrets, the first of
// which signs) and, optionally, public keys that verify only. A key verifies when it
//
//   - signs (the current signing key),
//   - is listed by the source for verification (until the source stops listing it:
//     then it is rejected at once — this is how a key is removed), or
//   - was the signing key until a rotation replaced it, and the grace period
//     ([WithGracePeriod], at least the maximum token lifetime plus the clock skew)
//     since that rotation has not ended.
//
// Tokens carry the kid of the key that signed them. [KeySet.Verify] looks the kid up
// and accepts only that key's pinned algorithm (no "alg" confusion, never "none"),
// requires exp, and checks exp, nbf and iat with the clock skew as leeway. Signing and
// verification use github.com/golang-jwt/jwt/v5; hotcert adds the rotation, not the
// cryptography.
//
// [KeySet.JWKS] and [KeySet.JWKSHandler] publish the public keys that verify for
// verifiers in other processes. Package jwtkeys/jwtgrpc has gRPC server
// interceptors and per-RPC credentials, jwtkeys/jwtmetrics Prometheus metrics.
//
// docs/jwt-keys.md describes the file layout, the rotation procedure and how to size
// the grace period.
package jwtkeys
