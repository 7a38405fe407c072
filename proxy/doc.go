// Package proxy gives programs that cannot reload their TLS material hotcert's
// rotation without embedding anything: a [Server] terminates TLS (or mTLS) in front
// of a local plaintext port or unix socket, and a [Client] accepts plaintext from a
// local program and originates mTLS to a remote service.
//
// Both are built on the library: the certificates and bundles come from
// [hotcert.Provider]s (one [*hotcert.Reloader] per source: files and kubelet
// volumes, credential bundles, SPIFFE), the per-handshake wiring from package
// tlsconfig (several identities chosen by SNI, trust current at each handshake,
// resumed sessions re-verified), and the graceful reconnect from package drain.
//
// Two modes:
//
//   - [ModeHTTP] proxies HTTP/1.1, HTTP/2 and gRPC with net/http and
//     httputil.ReverseProxy. After a rotation, connections opened under the previous
//     certificate end over a window: "Connection: close" on an HTTP/1 response, a
//     GOAWAY on an HTTP/2 connection; in-flight requests finish.
//   - [ModeTCP] forwards bytes. After a rotation it closes the connections opened
//     under the previous certificate once they are idle (no byte either way for the
//     idle time), each at a random moment within the window, and the busy ones when
//     they go idle or when the grace period ends, whichever comes first.
//
// In both modes a connection whose peer no longer verifies against a new client-CA
// bundle is cut at once, as drain does, and so is one whose peer a new deny list
// revokes ([WithDenyList]); peers are authorized by identity
// ([Allow]: SAN DNS names, URIs, SPIFFE IDs) during the handshake. The verified peer
// identity can be passed to the backend: a header in the style of Envoy's
// X-Forwarded-Client-Cert in HTTP mode (any incoming one is removed), the PROXY
// protocol v2 in TCP mode.
package proxy
