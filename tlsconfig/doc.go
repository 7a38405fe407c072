// Package tlsconfig builds crypto/tls configurations whose certificate and trust
// bundle follow a [hotcert.Provider]: every new handshake uses the Material that is
// current at that moment, connections already established keep what they were
// opened with.
//
// Servers get the current certificate and client CAs per handshake:
//
//	cfg := tlsconfig.MTLSServerConfig(reloader)   // or ServerConfig, HookServerConfig
//	ln, _ := tls.Listen("tcp", ":8443", cfg)
//
// The returned config leaves Certificates empty and sets GetConfigForClient, which
// hands out a clone of the caller's config holding the current leaf and, when the
// config asks for client certificates, the current CA bundle as ClientCAs. The clone
// is prepared once per change of Material and then shared by every handshake, so the
// handshake path allocates nothing beyond what crypto/tls itself needs. Session
// tickets keep working across rotations: crypto/tls encrypts them with the keys of
// the outer config, which never changes.
//
// Clients have two shapes:
//
//   - [Dialer] builds a fresh, standard-library-verified config from the current
//     Material for every connection (RootCAs, client certificate, ServerName from the
//     dialed host). Verification is exactly crypto/tls's: host name or IP SAN,
//     validity, extended key usage, chain and name constraints. The grpccreds and
//     httptls packages are built on it. Prefer it.
//   - [ClientConfig] and [HookClientConfig] return one config for code that must
//     hand a single *tls.Config to a library (tls.Dial, a database driver): the
//     client certificate is chosen per handshake, and the server certificate is
//     verified in VerifyConnection against the trust bundle current at that
//     handshake, with the expected name passed explicitly to x509 (never the SNI
//     value, which is empty when dialing an IP address).
//
// Session resumption is safe in both directions: crypto/tls (Go 1.26) drops a
// session whose chain no longer reaches a root of the current config, and every
// config built here adds a VerifyConnection that re-verifies a resumed peer's full
// chain against the current trust bundle, so a session established under a CA that
// has since been removed is refused even if the standard library's check were to
// change. A server's session resumes only under the SNI name it was established
// for (RFC 6066 §3): offered under another name, its ticket is set aside and the
// handshake is a full one, so a server with several identities never resumes a
// session of one identity under the host name of another.
package tlsconfig
