package chain

import "time"

// SetResolverSyncTimeout sets how long a new Resolver's informers may take to
// sync, for tests of informers that never do; the returned func restores it.
func SetResolverSyncTimeout(d time.Duration) (restore func()) {
	old := resolverSyncTimeout
	resolverSyncTimeout = d
	return func() { resolverSyncTimeout = old }
}
