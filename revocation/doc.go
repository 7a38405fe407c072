// Package revocation holds deny lists — revoked serial numbers per issuer, SHA-256
// hashes of public keys (SPKI), X.509 CRLs — as reloaded, validated material,
// enforced at every TLS handshake by package tlsconfig and cut from live
// connections by package drain.
//
// A [Reloader] follows a [Source] with the engine of every hotcert reloader: it
// re-reads on change notifications and poll ticks, ignores content it already
// holds (SHA-256), validates before it swaps, keeps the last good [List] when new
// content is bad, and logs and counts each distinct change or failure once. A CRL
// is accepted only when its signature verifies against the CA of the trust bundle
// that issued it (x509.RevocationList.CheckSignatureFrom) and its NextUpdate has
// not passed; a CRL in use that goes stale is reported and, by [StalePolicy],
// either still enforced ([KeepEnforcing], the default) or made to refuse every
// peer of its issuer ([RefuseAll]).
//
// The deny-list file grammar, one entry a line (blank lines and lines starting
// with # are skipped; any other line that does not parse refuses the whole list):
//
//	serial <hex serial, as openssl x509 -serial prints it> issuer <SHA-256 fingerprint of the issuing CA certificate>
//	spki <SHA-256 of the certificate's SubjectPublicKeyInfo>
//
// Hex may carry colons and either case. A spki entry matches a certificate
// anywhere in a peer's chain, so listing an intermediate's key refuses every
// certificate below it; a serial matches the certificate whose issuer in the
// verified chain has that fingerprint.
package revocation
