package drain

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/hotcert/hotcert"
)

// ReconnectOnChange calls reconnect, after a uniformly random delay within window,
// each time the certificate of p changes (not when only its trust bundle does), until
// ctx is done. It is the client-side half of a drain: an agent whose own certificate
// rotated re-dials so the server sees the new one, and a fleet of agents spreads its
// reconnects over the window. Changes during the delay are coalesced into one call.
func ReconnectOnChange(ctx context.Context, p hotcert.Notifier, window time.Duration, reconnect func()) {
	changed := make(chan struct{}, 1)
	unsub := p.Subscribe(func(prev, next *hotcert.Material) {
		if prev.SameIdentity(next) {
			return // only the trust bundle changed (a client without a certificate included)
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer unsub()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		t := time.NewTimer(time.Duration(rand.Float64() * float64(window)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		reconnect()
	}
}
