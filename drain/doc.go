// Package drain moves established gRPC connections onto new TLS material after a
// rotation, without a reconnect storm, and cuts peers the new trust no longer accepts.
//
// An established connection keeps the certificate it was opened with: only new
// handshakes see a rotation. That is fine while the old certificate is valid, but
// operators sometimes want every agent on the new certificate (before the old CA is
// removed from bundles), and a CA removed from the client-CA bundle should not leave
// its peers connected. Restarting the server does both, at the price of dropping
// every stream at once: N agents reconnect within about a second.
//
// [Server] serves each accepted connection with a grpc.Server of its own, so that one
// connection can be drained on its own with a real HTTP/2 GOAWAY (grpc-go offers
// per-server GracefulStop but no per-connection drain): in-flight RPCs finish, new
// RPCs go to a new connection, and a bounded grace period then closes what is left.
//
//   - On identity change (WithIdentityDrain): connections established under the
//     previous certificate are drained at times spread uniformly at random over a
//     window W, so N connections reconnect at about N/W per second.
//   - On trust change (WithTrustCut): connections whose peer certificate no longer
//     verifies against the new client-CA bundle (its CA removed, or the peer expired)
//     are drained promptly, each with a log line naming the peer and the reason.
//   - Before expiry (WithExpiryDrain): each connection is drained before the first
//     certificate it was authenticated with expires (the peer's chain, or the one
//     served), spread evenly over a window before NotAfter minus a margin.
//
// [ReconnectOnChange] is the client-side half: when the client's own certificate
// rotates, it calls a reconnect function after a random delay within a window.
package drain
