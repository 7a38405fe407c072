package hotcert

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Reloader keeps a [Store] in step with a [Source]: it re-reads the source on every
// change notification and poll tick, ignores content it has already seen (SHA-256),
// validates new content, and publishes it only when it is good. Failing content keeps
// the last good Material serving; it is treated as "maybe mid-write" for the settle
// window, then logged and counted once, and retried whenever the source changes again.
//
// A Reloader is a [Provider] and a [Notifier]. Reads of [Reloader.Current] take no
// lock and allocate nothing.
type Reloader struct {
	cfg   reloaderConfig
	src   Source
	store *Store
	kick  chan struct{}

	started  atomic.Bool
	closing  chan struct{}
	closeOne sync.Once
	stopped  chan struct{}

	mu          sync.Mutex // serialises checks and guards the fields below
	pendingAt   time.Time  // when failing content was first seen; zero when none pends
	retryDelay  time.Duration
	retryIn     time.Duration // >0: check again after this long (settle window)
	reported    bool          // lastFailKey has been logged and counted
	lastFailKey [32]byte
	lastErr     error
	lastErrAt   time.Time
	failures    uint64
}

var (
	_ Provider = (*Reloader)(nil)
	_ Notifier = (*Reloader)(nil)
)

const (
	firstRetry    = 25 * time.Millisecond
	maxWatchRetry = 30 * time.Second
)

// New performs the first load of src and returns a Reloader serving it. A source that
// cannot be read or content that does not validate is an error (retried for up to
// [WithInitialWait] if set): never an empty pool. Call [Reloader.Start] to follow
// changes.
func New(ctx context.Context, src Source, opts ...Option) (*Reloader, error) {
	cfg := defaultReloaderConfig()
	for _, o := range opts {
		o.applyReloader(&cfg)
	}
	r := &Reloader{
		cfg:     cfg,
		src:     src,
		store:   NewStore(nil),
		kick:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	m, err := r.initialLoad(ctx)
	if err != nil {
		return nil, fmt.Errorf("hotcert: initial load from %s: %w", src, err)
	}
	m = m.withGeneration(1)
	r.store.Set(m)
	r.cfg.logger.Info(r.cfg.msgLoaded, r.materialAttrs(m)...)
	r.cfg.observer.ObserveLoad(r.cfg.component, m, true)
	return r, nil
}

func (r *Reloader) initialLoad(ctx context.Context) (*Material, error) {
	deadline := time.Now().Add(r.cfg.initialWait)
	delay := 100 * time.Millisecond
	for {
		m, err := r.load(ctx)
		if err == nil {
			return m, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, err
		}
		t := time.NewTimer(min(delay, remaining))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func (r *Reloader) load(ctx context.Context) (*Material, error) {
	c, err := r.src.Read(ctx)
	if err != nil {
		return nil, err
	}
	return Validate(c, r.cfg.validateOpts...)
}

// Current returns the Material in use. It never returns nil.
func (r *Reloader) Current() *Material { return r.store.Current() }

// Subscribe implements [Notifier]: fn runs after every swap, coalesced.
func (r *Reloader) Subscribe(fn func(prev, next *Material)) func() { return r.store.Subscribe(fn) }

// Store returns the Store the Reloader publishes to.
func (r *Reloader) Store() *Store { return r.store }

// Status is a point-in-time view of a Reloader, for health endpoints and tools.
type Status struct {
	// Current is the Material in use.
	Current *Material
	// LastError is the last reported failure, or nil once good content was seen after it.
	LastError error
	// LastErrorAt is when LastError was reported.
	LastErrorAt time.Time
	// Failures counts reported failures since New.
	Failures uint64
}

// Status returns the Reloader's current status.
func (r *Reloader) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{Current: r.store.Current(), Failures: r.failures}
	if r.reported {
		st.LastError, st.LastErrorAt = r.lastErr, r.lastErrAt
	}
	return st
}

// Trigger asks the Reloader to re-read its source soon. It never blocks; triggers
// that arrive while one is pending are coalesced.
func (r *Reloader) Trigger() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Reload re-reads the source now, on the caller's goroutine, and returns once the
// result is published (or rejected). It returns nil when the content in use is the
// source's current content, and the validation error otherwise (the last good
// Material keeps serving). Use it to re-read per connection, as seed 002's agent
// re-reads its CA bundle on every dial.
func (r *Reloader) Reload(ctx context.Context) error { return r.check(ctx) }

// Start follows the source until ctx is done or Close is called. It blocks, and
// returns nil on a normal stop. It may be called once.
func (r *Reloader) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("hotcert: reloader already started")
	}
	defer close(r.stopped)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	var watchers sync.WaitGroup
	defer watchers.Wait()
	watchers.Go(func() { r.watch(ctx) })

	var tick <-chan time.Time
	if r.cfg.poll > 0 {
		t := time.NewTicker(r.cfg.poll)
		defer t.Stop()
		tick = t.C
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-tick:
		case <-retry.C:
		}
		_ = r.check(ctx)
		r.mu.Lock()
		in := r.retryIn
		r.mu.Unlock()
		retry.Stop()
		if in > 0 {
			retry.Reset(in)
		}
	}
}

// watch runs the source's Watch, restarting it with backoff if it fails to start:
// a watch error never ends reloading (polling covers the gap).
func (r *Reloader) watch(ctx context.Context) {
	delay := time.Second
	for {
		err := r.src.Watch(ctx, r.Trigger)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.cfg.logger.Warn("TLS source watch failed; relying on polling until it restarts",
				append(r.attrs("listener"), "source", r.src.String(), "error", err.Error(), "retry_in", delay.String())...)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		r.Trigger() // anything may have changed while no watch was up
		delay = min(2*delay, maxWatchRetry)
	}
}

// Close stops Start and waits for its goroutines to end. It is safe to call more
// than once, and before or without Start.
func (r *Reloader) Close() error {
	r.closeOne.Do(func() { close(r.closing) })
	if r.started.Load() {
		<-r.stopped
	}
	return nil
}

func (r *Reloader) check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retryIn = 0

	c, err := r.src.Read(ctx)
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: not the content's fault
	}
	var key [32]byte
	if err == nil {
		key = c.Hash()
	} else {
		// A read error has no content; its message identifies it so that the same
		// missing file is reported once, not once per poll.
		key = sha256.Sum256([]byte("hotcert read error\x00" + err.Error()))
	}
	cur := r.store.Current()
	if err == nil && key == cur.ContentHash() {
		r.pendingAt, r.reported, r.lastErr = time.Time{}, false, nil
		return nil
	}
	if r.reported && key == r.lastFailKey {
		return r.lastErr
	}
	var m *Material
	if err == nil {
		m, err = Validate(c, r.cfg.validateOpts...)
	}
	if err == nil {
		r.publish(cur, m)
		return nil
	}

	now := time.Now()
	if r.pendingAt.IsZero() {
		r.pendingAt, r.retryDelay = now, firstRetry
	}
	if waited := now.Sub(r.pendingAt); waited < r.cfg.settle {
		// Maybe mid-write (certificate written, key not yet): look again soon, and
		// once more at the end of the window, before calling it a failure.
		r.retryIn = min(r.retryDelay, r.cfg.settle-waited)
		r.retryDelay *= 2
		return err
	}
	r.pendingAt = time.Time{}
	r.reported, r.lastFailKey, r.lastErr, r.lastErrAt = true, key, err, now
	r.failures++
	r.cfg.logger.Error(r.cfg.msgFailed, append(r.attrs("listener"), "source", r.src.String(), "reason", string(ReasonOf(err)), "error", err.Error())...)
	r.cfg.observer.ObserveFailure(r.cfg.component, err)
	return err
}

func (r *Reloader) publish(prev, m *Material) {
	m = m.withGeneration(prev.Generation() + 1)
	r.store.Set(m)
	r.pendingAt, r.reported, r.lastErr = time.Time{}, false, nil
	r.cfg.logger.Info(r.cfg.msgReloaded, r.materialAttrs(m)...)
	r.cfg.observer.ObserveLoad(r.cfg.component, m, false)
}

func (r *Reloader) attrs(componentKey string) []any {
	return append([]any{componentKey, r.cfg.component}, r.cfg.logAttrs...)
}

// materialAttrs describes m for a log line: identifying, public data only.
func (r *Reloader) materialAttrs(m *Material) []any {
	a := r.attrs("component")
	if leaf := m.Leaf(); leaf != nil {
		a = append(a,
			"serial", leaf.SerialNumber.Text(16),
			"sha256", m.LeafFingerprint().String(),
			"subject", leaf.Subject.String(),
			"issuer", leaf.Issuer.String(),
			"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if m.HasTrust() {
		fps := make([]string, 0, len(m.TrustFingerprints()))
		for _, fp := range m.TrustFingerprints() {
			fps = append(fps, fp.String()[:16])
		}
		a = append(a, "ca_certificates", len(fps), "ca_sha256_prefixes", strings.Join(fps, ","))
	}
	return append(a, "source", m.Source(), "generation", m.Generation())
}
