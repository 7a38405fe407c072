package drain

import (
	"crypto/x509"
	"math"
	"sync"
	"time"

	"github.com/hotcert/hotcert"
)

// DefaultExpiryMargin is how long before a certificate's NotAfter the expiry drain
// has ended the connections it authenticated, at the latest.
const DefaultExpiryMargin = time.Minute

// Drain reasons of the expiry drain, as counted by [Observer.ObserveDrained].
const (
	// ReasonPeerCertExpiring: the peer's certificate chain (leaf or intermediate)
	// expires first.
	ReasonPeerCertExpiring = "peer_cert_expiring"
	// ReasonOwnCertExpiring: the certificate chain the connection was served with
	// expires first.
	ReasonOwnCertExpiring = "own_cert_expiring"
)

// WithExpiryDrain ends every connection before the certificates it was
// authenticated with expire: the peer's verified chain and, when own is not nil,
// the chain own served at the handshake. Each connection is drained (a GOAWAY,
// or "Connection: close" on HTTP) at a time within [NotAfter-margin-window,
// NotAfter-margin], spread evenly over the window across connections (N
// connections with one NotAfter reconnect at about N/window per second), so that
// no connection runs on expired credentials and no fleet reconnects at once. A
// connection handshaken already within margin of the expiry is drained within the
// window before halfway to it. margin <= 0 means [DefaultExpiryMargin]; window < 0 means 0.
func WithExpiryDrain(own Provider, margin, window time.Duration) Option {
	return optionFunc(func(c *config) {
		if margin <= 0 {
			margin = DefaultExpiryMargin
		}
		c.expiry = &expiryConfig{own: own, margin: margin, window: max(window, 0)}
	})
}

// WithClock sets the clock the expiry drain reads and waits on (default: the wall
// clock), e.g. a hotcerttest.FakeClock in a test.
func WithClock(clk hotcert.Clock) Option {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

type expiryConfig struct {
	own            Provider
	margin, window time.Duration
}

// wallClock is the default clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// ExpiryDrainTime returns when a connection authenticated with a certificate that
// expires at notAfter is to be drained, seen at now: notAfter-margin-frac*window
// (frac in [0,1) places the connection in the window), never before now; when now
// is already within margin of notAfter, the window ends halfway from now to it. It is
// what [WithExpiryDrain] schedules, for a client that spreads its own reconnects.
func ExpiryDrainTime(now, notAfter time.Time, margin, window time.Duration, frac float64) time.Time {
	if !notAfter.After(now) {
		return now
	}
	end := notAfter.Add(-margin)
	if !end.After(now) {
		end = now.Add(notAfter.Sub(now) / 2)
	}
	start := end.Add(-window)
	if start.Before(now) {
		start = now
	}
	return end.Add(-time.Duration(frac * float64(end.Sub(start))))
}

// expiry schedules the expiry drains of one server's connections: one clock timer
// per connection (the runtime's timer heap: cheap at 10,000 connections), stopped
// when the connection closes.
type expiry struct {
	cfg *config
	// drain drains t with reason; it returns false when t is already draining.
	drain func(t target, reason string) bool

	mu     sync.Mutex
	seq    uint64 // connections scheduled: places each in the window
	timers map[target]scheduled
	closed bool
}

type scheduled struct {
	at   time.Time
	stop func() bool
}

// newExpiry returns nil when the expiry drain is off.
func newExpiry(cfg *config, drain func(target, string) bool) *expiry {
	if cfg.expiry == nil {
		return nil
	}
	return &expiry{cfg: cfg, drain: drain, timers: map[target]scheduled{}}
}

// phi is the golden ratio's fractional part: the k-th connection sits at
// frac(k*phi) of the window, a low-discrepancy sequence, so that any N
// consecutive connections sharing one NotAfter are spread within a few of N/W per
// second over the window, where uniform random offsets would bunch up.
var phi = (math.Sqrt(5) - 1) / 2

// schedule plans the drain of t, handshaken with peer (verified chain, leaf first;
// nil without a client certificate), before the first of its certificates expires.
func (e *expiry) schedule(t target, peer []*x509.Certificate) {
	if e == nil {
		return
	}
	notAfter, reason := chainNotAfter(peer), ReasonPeerCertExpiring
	var own []*x509.Certificate
	if e.cfg.expiry.own != nil {
		own = e.cfg.expiry.own.Current().Chain()
	}
	if o := chainNotAfter(own); !o.IsZero() && (notAfter.IsZero() || o.Before(notAfter)) {
		notAfter, reason = o, ReasonOwnCertExpiring
	}
	if notAfter.IsZero() {
		return // nothing expires
	}
	clk := e.cfg.clock
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if _, ok := e.timers[t]; ok {
		return
	}
	e.seq++
	frac := math.Mod(float64(e.seq)*phi, 1)
	now := clk.Now()
	at := ExpiryDrainTime(now, notAfter, e.cfg.expiry.margin, e.cfg.expiry.window, frac)
	e.timers[t] = scheduled{at: at, stop: clk.AfterFunc(at.Sub(now), func() {
		e.mu.Lock()
		delete(e.timers, t)
		e.mu.Unlock()
		if !e.drain(t, reason) {
			return
		}
		e.cfg.observer.ObserveDrained(e.cfg.component, reason)
		attrs := []any{e.cfg.logKey, e.cfg.component, "remote", t.RemoteAddr().String(), "reason", reason, "not_after", notAfter.UTC().Format(time.RFC3339)}
		if reason == ReasonPeerCertExpiring {
			attrs = append(attrs, "peer_subject", peer[0].Subject.String(), "peer_serial", hotcert.FormatSerial(peer[0].SerialNumber))
		}
		e.cfg.logger.Info("draining connection before its certificate expires", attrs...)
	})}
}

// forget stops t's timer: it closed.
func (e *expiry) forget(t target) {
	if e == nil {
		return
	}
	e.mu.Lock()
	s, ok := e.timers[t]
	delete(e.timers, t)
	e.mu.Unlock()
	if ok {
		s.stop()
	}
}

// close stops every timer; nothing is scheduled afterwards.
func (e *expiry) close() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.closed = true
	timers := e.timers
	e.timers = nil
	e.mu.Unlock()
	for _, s := range timers {
		s.stop()
	}
}

// pending returns the drain times not yet reached, for tests.
func (e *expiry) pending() []time.Time {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]time.Time, 0, len(e.timers))
	for _, s := range e.timers {
		out = append(out, s.at)
	}
	return out
}

// chainNotAfter is the earliest NotAfter of chain (zero for an empty chain).
func chainNotAfter(chain []*x509.Certificate) time.Time {
	var t time.Time
	for _, c := range chain {
		if c != nil && (t.IsZero() || c.NotAfter.Before(t)) {
			t = c.NotAfter
		}
	}
	return t
}
