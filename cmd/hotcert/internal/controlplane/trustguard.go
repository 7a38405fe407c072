package controlplane

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// DefaultTrustGuardMargin is how close to its expiry the previous leaf may come
// before a held-back leaf is served anyway, when Config.TrustGuardMargin is not set.
const DefaultTrustGuardMargin = time.Hour

// DefaultTrustGuardRemember is how long the trust guard counts an agent whose
// stream closed, when Config.TrustGuardRemember is not set.
const DefaultTrustGuardRemember = time.Minute

// DefaultTrustGuardInterval is how often a held-back leaf is re-examined besides
// on every agent report, when Config.TrustGuardInterval is not set.
const DefaultTrustGuardInterval = time.Second

// trustGuard is the server certificate's provider when Config.TrustGuard is set:
// what tlsconfig's server config reads per handshake, and what the drain follows. It
// passes on the reloader's newest leaf only once every connected agent that reports
// its trust holds that leaf's issuer (from the fleet view), or once the leaf it holds
// back in favour of comes within the margin of its expiry. Until then the previous
// leaf keeps serving.
//
// An agent trusts the issuer when its bundle holds a CA whose fingerprint is the top
// certificate of the leaf's chain or whose subject is that certificate's issuer name.
// Agents that report nothing (older releases) are not counted: nothing is known of
// their bundle. Two CAs with one subject name are not told apart. Agents whose
// stream closed less than remember ago count as well, with their last report: a
// replica restart or a network blip empties the fleet for a moment, and the agents
// are about to reconnect with the bundle they reported.
type trustGuard struct {
	s        *Server
	src      *hotcert.Reloader
	out      *hotcert.Store
	margin   time.Duration
	remember time.Duration
	now      func() time.Time

	mu      sync.Mutex          // serializes evaluate: one decision (and log line) at a time
	heldFor hotcert.Fingerprint // the leaf last logged as held back

	lacking atomic.Int64 // agents lacking the held-back leaf's issuer (0: nothing held)
	held    atomic.Bool
}

var _ interface {
	hotcert.Provider
	hotcert.Notifier
} = (*trustGuard)(nil)

func newTrustGuard(s *Server, src *hotcert.Reloader, margin, remember time.Duration, now func() time.Time) *trustGuard {
	return &trustGuard{s: s, src: src, out: hotcert.NewStore(src.Current()), margin: margin, remember: remember, now: now}
}

// Current returns the leaf the next handshake serves.
func (g *trustGuard) Current() *hotcert.Material { return g.out.Current() }

// Subscribe follows what the guard serves (not what the reloader holds).
func (g *trustGuard) Subscribe(fn func(prev, next *hotcert.Material)) func() {
	return g.out.Subscribe(fn)
}

// pending reports whether the reloader holds a leaf the guard does not serve yet:
// cheap enough for every agent report.
func (g *trustGuard) pending() bool { return g.src.Current() != g.out.Current() }

// run re-examines a held-back leaf on every reloader change and every interval
// (the margin of expiry is judged by the clock), until ctx is done.
func (g *trustGuard) run(ctx context.Context, every time.Duration) {
	unsub := g.src.Subscribe(func(_, _ *hotcert.Material) { g.evaluate() })
	defer unsub()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if g.pending() {
				g.evaluate()
			}
		}
	}
}

// evaluate serves the reloader's newest material if it is safe, or if the previous
// leaf is about to expire; otherwise it keeps the previous leaf and says so once
// per held-back leaf.
func (g *trustGuard) evaluate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	next, cur := g.src.Current(), g.out.Current()
	if next == cur {
		return
	}
	if next.SameIdentity(cur) {
		g.out.Set(next) // same leaf and key (a re-read): nothing to guard
		g.release()
		return
	}
	lacking, agents := g.agentsLacking(next)
	cfg := g.s.cfg
	attrs := []any{cfg.ComponentKey, cfg.Component,
		"serial", hotcert.FormatSerial(next.Leaf().SerialNumber), "issuer", next.Leaf().Issuer.String(),
		"agents_lacking_issuer", lacking, "agents", agents}
	switch {
	case lacking == 0:
		if g.held.Load() {
			g.s.log.Info("server certificate released: every connected agent trusts its issuer", attrs...)
		}
	case !cur.HasIdentity() || !g.now().Add(g.margin).Before(cur.NotAfter()):
		g.s.log.Warn("server certificate released: the previous leaf is within the margin of its expiry, although connected agents do not trust the new issuer",
			append(attrs, "previous_not_after", cur.NotAfter().UTC(), "margin", g.margin)...)
	default:
		g.lacking.Store(int64(lacking))
		g.held.Store(true)
		if g.heldFor != next.LeafFingerprint() {
			g.heldFor = next.LeafFingerprint()
			g.s.log.Warn("server certificate held back: connected agents do not trust its issuer",
				append(attrs, "serving_serial", hotcert.FormatSerial(cur.Leaf().SerialNumber), "previous_not_after", cur.NotAfter().UTC(), "margin", g.margin)...)
		}
		return
	}
	g.out.Set(next)
	g.release()
}

func (g *trustGuard) release() {
	g.held.Store(false)
	g.lacking.Store(0)
	g.heldFor = hotcert.Fingerprint{}
}

// agentsLacking counts the connected agents that report their trust and do not
// trust the issuer of m's leaf, and the agents that report their trust.
func (g *trustGuard) agentsLacking(m *hotcert.Material) (lacking, reporting int) {
	chain := m.Chain()
	if len(chain) == 0 {
		return 0, 0
	}
	top := chain[len(chain)-1]
	topFP, issuer := hotcert.FingerprintOf(top).String(), top.Issuer.String()
	f := g.s.Fleet()
	subject := make(map[string]string, len(f.CAs))
	for _, ca := range f.CAs {
		subject[ca.SHA256] = ca.Subject
	}
	count := func(trusts bool) {
		reporting++
		if !trusts {
			lacking++
		}
	}
	connected := make(map[string]bool, len(f.AgentList))
	for _, a := range f.AgentList {
		connected[a.ID] = true
		if a.TrustReading == agentrpc.TrustUnknown {
			continue
		}
		count(slices.ContainsFunc(a.CAs, func(fp string) bool { return fp == topFP || subject[fp] == issuer }))
	}
	// Agents whose stream closed recently, with their last report: the server's
	// memory of departed agents (departed.go), within the guard's own window.
	for _, t := range g.s.departuresWithin(g.remember, connected) {
		count(slices.ContainsFunc(t.CAs, func(c hotcert.CertificateSummary) bool { return c.SHA256 == topFP || c.Subject == issuer }))
	}
	return lacking, reporting
}

// Trust guard metrics.
var (
	descGuardHeld = prometheus.NewDesc("hotcert_controlplane_trust_guard_held",
		"1 while the trust guard holds a new server certificate back because connected agents do not trust its issuer.", nil, nil)
	descGuardLacking = prometheus.NewDesc("hotcert_controlplane_trust_guard_agents_lacking_issuer",
		"Connected agents that do not trust the issuer of the server certificate the trust guard holds back (0 when nothing is held).", nil, nil)
)

type guardCollector struct{ g *trustGuard }

func (c guardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGuardHeld
	ch <- descGuardLacking
}

func (c guardCollector) Collect(ch chan<- prometheus.Metric) {
	held := 0.0
	if c.g.held.Load() {
		held = 1
	}
	ch <- prometheus.MustNewConstMetric(descGuardHeld, prometheus.GaugeValue, held)
	ch <- prometheus.MustNewConstMetric(descGuardLacking, prometheus.GaugeValue, float64(c.g.lacking.Load()))
}
