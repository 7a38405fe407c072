// Package grpccreds provides gRPC transport credentials whose certificate and
// trust bundle follow a [hotcert.Provider].
//
// The server credentials ([NewServer], [NewMTLSServer]) are credentials.NewTLS on a
// tlsconfig server config: each new connection is handshaken with the certificate
// and client CAs current at that moment, ALPN "h2" is negotiated (grpc-go >= 1.68
// applies its defaults to the configs GetConfigForClient returns), and connections
// and streams already established keep the certificate they were opened with.
//
// The client credentials ([NewClient]) wrap credentials.NewTLS: every
// ClientHandshake (the first dial and every reconnect) takes a fresh
// standard-library-verified config built from the current Material, optionally
// re-reading a CA bundle file first (tlsconfig.WithReloadOnDial), and delegates to
// it, so the server name comes from the authority, IP SANs are checked, ALPN is
// enforced and the AuthInfo is a credentials.TLSInfo: per-RPC credentials that
// require transport security keep working. Never do TLS inside a context dialer with
// insecure credentials instead.
package grpccreds
