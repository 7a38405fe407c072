// Package httptls wires a [hotcert.Provider] into net/http servers and clients.
//
// [ServerConfig] and [MTLSServerConfig] return an http.Server TLSConfig that
// negotiates "h2" and "http/1.1" (the configs crypto/tls gets from
// GetConfigForClient must list them, not only the outer one) and presents the
// certificate current at each handshake. Start the server with
// ListenAndServeTLS("", "").
//
// [NewTransport] returns an http.RoundTripper whose connections are dialed with a
// fresh standard-library-verified config from the current Material, and which
// closes its idle connections when the client certificate or the CA bundle
// changes, so the next request handshakes with the new material. Connections busy
// at that moment finish their requests and stay in use (an established connection
// keeps the verification it was opened with).
package httptls
