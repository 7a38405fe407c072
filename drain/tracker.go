package drain

import (
	"crypto/x509"
	"net"
	"sync"
	"time"

	"github.com/hotcert/hotcert"
)

// Tracker applies the drain policies of [Server] and [HTTPServer] to connections
// the caller serves itself, in a protocol package drain does not know (a raw TCP
// proxy, for one): it decides which connections to drain and when, and the caller
// says how, with the function given to [NewTracker]. The identity drain, the window,
// the trust cut, the revocation cut, their log lines and the Observer are those of
// the options (WithIdentityDrain, WithTrustCut, WithServerTrustCut,
// WithRevocationCut, WithLogger, WithObserver, WithComponent, WithComponentLabel);
// WithGrace is the caller's to apply.
type Tracker struct {
	cfg    config
	drain  func(c *Tracked, prompt bool)
	policy *policy

	mu     sync.Mutex
	conns  map[*Tracked]struct{}
	timers map[*time.Timer]struct{}
	unsubs []func()
	closed bool
}

// Tracked is one connection of a [Tracker], from [Tracker.Track] until Done.
type Tracked struct {
	t        *Tracker
	conn     net.Conn
	identity *hotcert.Material

	mu       sync.Mutex
	peer     []*x509.Certificate
	draining bool // drain was called
	cutDone  bool // drain was called for a revocation cut
}

// NewTracker returns a Tracker that calls drain when a tracked connection is to
// reconnect: onto a new certificate (prompt false: the caller ends it gracefully),
// or because its peer is no longer trusted or revoked (prompt true: end it now).
// drain is called once per connection, and once more, with prompt true, when a
// connection drained gracefully is revoked before it ends ([WithRevocationCut]):
// a peer no longer acceptable does not keep the grace of a drain that began
// before. It is called on a goroutine of the Tracker's (or, for a peer the deny
// list already denies when SetPeer records it, on SetPeer's).
func NewTracker(drain func(c *Tracked, prompt bool), opts ...Option) *Tracker {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	t := &Tracker{cfg: cfg, drain: drain, conns: map[*Tracked]struct{}{}, timers: map[*time.Timer]struct{}{}}
	drainOne := func(tg target, prompt bool) bool {
		c := tg.(*Tracked)
		if !c.markDraining() {
			return false
		}
		t.drain(c, prompt)
		return true
	}
	p := &policy{cfg: &t.cfg, conns: t.targets, after: t.after, drain: drainOne,
		cut: func(tg target) bool {
			c := tg.(*Tracked)
			if !c.markCut() {
				return false
			}
			t.drain(c, true)
			return true
		}}
	t.policy = p
	t.unsubs = p.subscribe()
	return t
}

// Track starts tracking c. Call it before c's TLS handshake begins, so that the
// certificate recorded as served is never newer than the one the handshake
// presents; call SetPeer once the handshake verified the peer, and Done when c is
// closed.
func (t *Tracker) Track(c net.Conn) *Tracked {
	tc := &Tracked{t: t, conn: c}
	if t.cfg.identity != nil {
		tc.identity = t.cfg.identity.Current()
	}
	t.mu.Lock()
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc
}

// Conn returns the tracked connection.
func (c *Tracked) Conn() net.Conn { return c.conn }

// SetPeer records the verified peer chain (leaf first, up to its root: a serial is
// matched with the issuer that follows it) that the trust and revocation cuts
// re-check. With WithRevocationCut, a chain the current list already denies (the
// list changed after the handshake checked it, before SetPeer) is cut at once.
func (c *Tracked) SetPeer(chain []*x509.Certificate) {
	c.mu.Lock()
	c.peer = chain
	c.mu.Unlock()
	c.t.policy.checkNewPeer(c, chain)
}

// Done stops tracking the connection.
func (c *Tracked) Done() {
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
}

func (c *Tracked) netConn() net.Conn { return c.conn }

func (c *Tracked) servedIdentity() *hotcert.Material { return c.identity }

func (c *Tracked) peerChain() []*x509.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peer
}

// RemoteAddr is the connection's remote address.
func (c *Tracked) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

func (c *Tracked) markDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return false
	}
	c.draining = true
	return true
}

// markCut returns false if the connection was already cut.
func (c *Tracked) markCut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cutDone {
		return false
	}
	c.cutDone, c.draining = true, true
	return true
}

// Conns returns the number of tracked connections.
func (t *Tracker) Conns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

func (t *Tracker) targets() []target {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]target, 0, len(t.conns))
	for c := range t.conns {
		out = append(out, c)
	}
	return out
}

func (t *Tracker) after(d time.Duration, f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		t.mu.Lock()
		delete(t.timers, tm)
		t.mu.Unlock()
		f()
	})
	t.timers[tm] = struct{}{}
}

// Close stops following changes and cancels the drains not yet started.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	for tm := range t.timers {
		tm.Stop()
	}
	unsubs := t.unsubs
	t.unsubs = nil
	t.mu.Unlock()
	for _, u := range unsubs {
		u()
	}
}
