// Package spiffe is a [hotcert.Source] that follows the SPIFFE Workload API (a SPIRE
// agent's socket, or any other Workload API server): the workload's X.509-SVID
// becomes the identity of hotcert Material, and the X.509 bundle of the SVID's
// trust domain its trust bundle, so an SVID rotated by the agent reaches the next
// handshake of every tlsconfig, grpccreds and httptls wiring with hotcert's
// validation, metrics and log lines.
//
// The Workload API client is go-spiffe's (workloadapi.Client): Read fetches the
// current X.509 context, Watch follows the agent's stream and asks the Reloader to
// re-read on every update and on every stream error. The Reloader then does what it
// does for any source: content it already serves costs one hash comparison, a new
// SVID is validated before it is served, bad content keeps the last good Material
// serving and is logged and counted once.
//
//	src, err := spiffe.New(ctx, spiffe.WithAddr("unix:///run/spire/agent.sock"))
//	if err != nil { ... }
//	defer src.Close()
//	r, err := hotcert.New(ctx, src,
//		hotcert.WithComponent("api"),
//		hotcert.WithInitialWait(time.Minute), // until the agent has issued the SVID
//		hotcert.WithValidation(hotcert.WithChainToOwnTrust()))
//	if err != nil { ... }
//	go r.Start(ctx)
//	cfg := tlsconfig.MTLSServerConfig(r)
//
// When the agent goes away (restart, upgrade, crash), reads fail: the last good
// Material keeps serving, and the outage is one failure — one "TLS certificate
// reload failed" line, one increment of the failure counter — however many reads
// and reconnect attempts it lasts, because every read of one outage fails with the
// same input and reason (the Reloader reports a failure once per input and reason,
// however gRPC's messages vary). When the agent is back, the stream reconnects (go-spiffe
// retries it, gRPC redials the socket), the Reloader re-reads and serves the
// agent's SVID, and the failure clears. A workload the agent has no registration
// entry for yet reads as [hotcert.ReasonMissing] (retried by
// hotcert.WithInitialWait at startup).
//
// Verification stays X.509 verification against the trust domain's bundle: any
// SVID of the trust domain is accepted as a peer. To authorize SPIFFE IDs, check
// the peer's URI SAN in a VerifyConnection of the base config.
//
// The package has a Go module of its own (github.com/hotcert/hotcert/source/spiffe),
// so go-spiffe and its gRPC stack stay out of the module graph of programs that do
// not use it.
package spiffe
