package revocation

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
)

// Reloader keeps a List in step with a [Source], with the rules of every hotcert
// reloader (see the package documentation). Handshakes read [Reloader.Current]:
// one atomic load, no lock.
type Reloader struct {
	cfg    config
	src    Source
	trust  hotcert.Provider
	engine *reload.Engine[Content, *List]
	cur    atomic.Pointer[List]

	mu     sync.Mutex
	subs   map[int]chan struct{}
	nextID int
	stale  map[string]bool // CRLs (issuer + next update) already reported stale
}

// New performs the first load of src and returns a Reloader serving it. trust is
// the CA bundle CRL signatures are verified against: the bundle the same side
// verifies its peers with (a server's client CAs, a client's roots); it may be nil
// when src holds no CRL. When trust is a hotcert.Notifier, a change of the bundle
// validates the content again. A source that cannot be read or content that does
// not validate is an error: a Reloader never starts with an unknown list.
func New(ctx context.Context, src Source, trust hotcert.Provider, opts ...Option) (*Reloader, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.ApplyReload(&cfg)
	}
	r := &Reloader{cfg: cfg, src: src, trust: trust, subs: map[int]chan struct{}{}, stale: map[string]bool{}}
	if l, ok := src.(hotcert.SourceLogger); ok {
		l.SetDefaultLogger(cfg.reload.Logger.With(cfg.reload.Attrs()...))
	}
	r.engine = reload.New[Content, *List](src, reload.Spec[Content, *List]{
		Hash:         r.hash,
		Validate:     r.validate,
		CurrentHash:  func() [32]byte { return r.cur.Load().hash },
		Publish:      r.publish,
		Failed:       r.failed,
		ReadErrorKey: hotcert.ReadErrorKey,
		WatchFailed: func(err error, retryIn time.Duration) {
			cfg.reload.Logger.Warn("deny list source watch failed; relying on polling until it restarts",
				append(cfg.reload.Attrs(), "source", src.String(), "error", err.Error(), "retry_in", retryIn.String())...)
		},
		Settle:    cfg.reload.Settle,
		Poll:      cfg.reload.Poll,
		Now:       cfg.clock.Now,
		AfterFunc: cfg.clock.AfterFunc,
	})
	l, err := r.engine.Initial(ctx, cfg.reload.InitialWait)
	if err != nil {
		var he *hotcert.Error
		if errors.As(err, &he) && he.Input != "" {
			return nil, fmt.Errorf("revocation: %w", err)
		}
		return nil, fmt.Errorf("revocation: reading %s: %w", src, err)
	}
	l = l.withGeneration(1)
	r.cur.Store(l)
	cfg.reload.Logger.Info("deny list loaded", r.listAttrs(l)...)
	cfg.observer.ObserveLoad(cfg.reload.Component, l, true)
	return r, nil
}

// hash is the engine's key: the content and the trust bundle it is checked
// against, so a changed bundle validates the same CRL again.
func (r *Reloader) hash(c Content) [32]byte {
	ch := c.Hash()
	var th [32]byte
	if r.trust != nil {
		th = r.trust.Current().ContentHash()
	}
	return sha256.Sum256(append(ch[:], th[:]...))
}

func (r *Reloader) validate(c Content) (*List, error) {
	var trust *hotcert.Material
	if r.trust != nil {
		trust = r.trust.Current()
	}
	l, err := Validate(c, trust, r.cfg.clock.Now())
	if err != nil {
		return nil, err
	}
	l.hash, l.policy, l.now = r.hash(c), r.cfg.policy, r.cfg.clock.Now
	return l, nil
}

// Current returns the List in use. It never returns nil.
func (r *Reloader) Current() *List { return r.cur.Load() }

// Policy returns the stale-CRL policy the lists of r enforce.
func (r *Reloader) Policy() StalePolicy { return r.cfg.policy }

// Start follows the source (and the trust bundle, when it is a Notifier) until
// ctx is done or Close is called, and reports each CRL that goes stale once (with
// [RefuseAll], subscribers are told, so the live cut ends its issuer's peers). It
// blocks, returns nil on a normal stop, and may be called once.
func (r *Reloader) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if n, ok := r.trust.(hotcert.Notifier); ok {
		stop := n.Subscribe(func(_, _ *hotcert.Material) { r.engine.Trigger() })
		defer stop()
	}
	wg.Go(func() { r.staleLoop(ctx) })
	err := r.engine.Run(ctx)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("revocation: %w", err)
	}
	return nil
}

// Close stops Start. It is safe to call more than once, and before or without Start.
func (r *Reloader) Close() error {
	r.engine.Close()
	return nil
}

// Reload re-reads the source now: nil when the content in use is the source's
// current content, the validation error otherwise (the last good list stays).
func (r *Reloader) Reload(ctx context.Context) error { return r.engine.Check(ctx) }

// Trigger asks the Reloader to re-read its source soon. It never blocks.
func (r *Reloader) Trigger() { r.engine.Trigger() }

// Status is a Reloader's state: the list in use and the last failure.
type Status struct {
	Current     *List
	LastError   error
	LastErrorAt time.Time
	Failures    uint64
}

// Status returns the Reloader's status.
func (r *Reloader) Status() Status {
	st := r.engine.Status()
	return Status{Current: r.cur.Load(), LastError: st.LastError, LastErrorAt: st.LastErrorAt, Failures: st.Failures}
}

// Subscribe calls fn, on a goroutine of its own, after the List changes (a new
// list, or with [RefuseAll] a CRL gone stale); changes while fn runs are coalesced
// and fn then sees the newest. The returned function unsubscribes and waits for a
// running fn to return.
func (r *Reloader) Subscribe(fn func(prev, next *List)) (unsubscribe func()) {
	kick := make(chan struct{}, 1)
	done, stopped := make(chan struct{}), make(chan struct{})
	r.mu.Lock()
	id := r.nextID
	r.nextID++
	r.subs[id] = kick
	last := r.cur.Load()
	r.mu.Unlock()
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-kick:
			}
			if next := r.cur.Load(); next != last {
				fn(last, next)
				last = next
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.subs, id)
			r.mu.Unlock()
			close(done)
			<-stopped
		})
	}
}

func (r *Reloader) set(l *List) {
	r.mu.Lock() // a subscriber registered before this Set sees it
	r.cur.Store(l)
	for _, k := range r.subs {
		select {
		case k <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
}

func (r *Reloader) publish(l *List) {
	l = l.withGeneration(r.cur.Load().generation + 1)
	r.set(l)
	r.cfg.reload.Logger.Info("deny list reloaded", r.listAttrs(l)...)
	r.cfg.observer.ObserveLoad(r.cfg.reload.Component, l, false)
}

func (r *Reloader) failed(err error) {
	r.cfg.reload.Logger.Error("deny list reload failed", append(r.cfg.reload.Attrs(),
		"source", r.src.String(), "reason", string(hotcert.ReasonOf(err)), "error", err.Error())...)
	r.cfg.observer.ObserveFailure(r.cfg.reload.Component, err)
}

// staleLoop waits for the earliest NextUpdate of the list in use and reports the
// CRLs it made stale, once each; with RefuseAll it republishes the list so that
// subscribers (the live cut) look at their connections again.
func (r *Reloader) staleLoop(ctx context.Context) {
	wake := make(chan struct{}, 1)
	changed := r.Subscribe(func(_, _ *List) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer changed()
	for {
		now := r.cfg.clock.Now()
		r.reportStale(now)
		var stop func() bool
		if at := r.cur.Load().nextStale(now); !at.IsZero() {
			stop = r.cfg.clock.AfterFunc(at.Sub(now)+time.Millisecond, func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
		}
		select {
		case <-ctx.Done():
			if stop != nil {
				stop()
			}
			return
		case <-wake:
			if stop != nil {
				stop()
			}
		}
	}
}

func (r *Reloader) reportStale(now time.Time) {
	l := r.cur.Load()
	var newly bool
	for _, c := range l.crls {
		key := c.IssuerSHA256 + c.NextUpdate.String()
		if !c.stale(now) || r.stale[key] {
			continue
		}
		r.stale[key], newly = true, true
		r.cfg.reload.Logger.Warn("deny list CRL is stale", append(r.cfg.reload.Attrs(),
			"issuer", c.Issuer, "next_update", c.NextUpdate.Format(time.RFC3339), "policy", r.cfg.policy.String(),
			"version", l.Version())...)
		r.cfg.observer.ObserveStale(r.cfg.reload.Component, c)
	}
	if newly && r.cfg.policy == RefuseAll {
		r.set(l.withGeneration(l.generation + 1))
	}
}

func (r *Reloader) listAttrs(l *List) []any {
	in := l.Info()
	return append(r.cfg.reload.Attrs(), "version", in.Version, "serials", in.Serials, "spkis", in.SPKIs,
		"crls", len(in.CRLs), "source", in.Source, "generation", in.Generation)
}
