package referencerules

import "time"

// SetResolverSyncTimeout sets how long a new Resolver's informers may take to
// sync, for tests of informers that never do; the returned func restores it.
func SetResolverSyncTimeout(d time.Duration) (restore func()) {
	old := resolverSyncTimeout
	resolverSyncTimeout = d
	return func() { resolverSyncTimeout = old }
}

// SetCRDSyncWarning sets how long Live waits for the first list of
// ReferenceRules before it logs that it cannot list them; the returned func
// restores it.
func SetCRDSyncWarning(d time.Duration) (restore func()) {
	old := crdSyncWarning
	crdSyncWarning = d
	return func() { crdSyncWarning = old }
}

// SetCRDPollInterval sets how often Live looks for a ReferenceRule CRD that is
// not installed; the returned func restores it.
func SetCRDPollInterval(d time.Duration) (restore func()) {
	old := crdPollInterval
	crdPollInterval = d
	return func() { crdPollInterval = old }
}
