package drain

// Observer receives the drains of a [Server] or [HTTPServer], for metrics: it
// counts, it never decides. Package metrics provides a Prometheus implementation
// (metrics.NewDrain). Calls may come from any goroutine.
type Observer interface {
	// ObserveDrainStarted is called once per rotation of the identity that drains
	// connections established under the previous certificate.
	ObserveDrainStarted(component string)
	// ObserveDrained is called once per connection sent a GOAWAY, with the reason:
	// "identity" (a new certificate), "trust" (its peer is no longer trusted),
	// "revoked" (its peer is on the deny list; the connection is closed, no GOAWAY),
	// or ReasonPeerCertExpiring / ReasonOwnCertExpiring (WithExpiryDrain).
	ObserveDrained(component, reason string)
	// ObserveCut is called once per connection cut because its peer is no longer
	// acceptable, after ObserveDrained with reason "trust" or "revoked".
	ObserveCut(component string)
}

type nopObserver struct{}

func (nopObserver) ObserveDrainStarted(string)    {}
func (nopObserver) ObserveDrained(string, string) {}
func (nopObserver) ObserveCut(string)             {}
