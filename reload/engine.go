// Package reload is the engine behind hotcert.Reloader and jwtkeys.KeySet; use it
// for your own reloaded content. An [Engine] re-reads a [Source] on change
// notifications, poll ticks and settle retries, deduplicates by content hash,
// validates, publishes good content, and reports bad content once. It is generic over
// the raw content C a source returns and the validated value T it publishes, so TLS
// material and JWT key sets share one behaviour: fast on atomic swaps, calm on
// non-atomic writers, keep-last-good, count once. [Settings] and [Target] are the
// configuration every such reloader shares, set by hotcert's reload options
// (hotcert.ReloadOption).
//
// The package uses the standard library only.
package reload

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Source reads raw content C and reports possible changes; hotcert.SourceOf is the
// same contract, documented there.
type Source[C any] interface {
	Read(ctx context.Context) (C, error)
	Watch(ctx context.Context, changed func()) error
	String() string
}

// Spec tells the engine how to handle content.
type Spec[C, T any] struct {
	// Hash identifies content: equal hashes are the same content.
	Hash func(C) [32]byte
	// Validate turns content into the value to publish.
	Validate func(C) (T, error)
	// CurrentHash returns the content hash of the value in use.
	CurrentHash func() [32]byte
	// Publish makes v the value in use; it runs on the engine's goroutine after
	// successful validation of content not in use.
	Publish func(v T)
	// Failed reports bad content once, after its settle window.
	Failed func(err error)
	// ReadErrorKey identifies a read error, which has no content to hash: reads
	// failing with equal keys are one failure, reported once (a missing file once,
	// not once per poll). Default: the error's message, so a source whose messages
	// vary during one outage (a gRPC stream: "EOF", then "connection refused")
	// needs a key that does not (hotcert.ReadErrorKey: the input and reason).
	ReadErrorKey func(err error) string
	// WatchFailed reports that the source's watch ended with an error; it is
	// restarted after retryIn, and polling covers the gap.
	WatchFailed func(err error, retryIn time.Duration)
	// Settle is how long failing content is treated as "maybe mid-write".
	Settle time.Duration
	// Poll is the interval of re-reads without notifications (0: none).
	Poll time.Duration
	// ValidAt, if set, tells when content refused with err may be accepted by the
	// passage of time alone (a certificate not valid yet: its NotBefore), or the
	// zero time when only new content can change the answer. Such a refusal is
	// never cached as final: it is reported once, the content is checked again at
	// that time, and every re-read validates it again.
	ValidAt func(err error) time.Time
	// Now is the clock ValidAt's times are on (the validation clock; default
	// time.Now).
	Now func() time.Time
	// AfterFunc is Now's timer: it calls f once d has passed on that clock, unless
	// stop is called first (default time.AfterFunc). The engine waits for a
	// ValidAt time with it, so that a fake clock moved past the time triggers the
	// check without real waiting.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

const (
	firstRetry    = 25 * time.Millisecond
	maxWatchRetry = 30 * time.Second
	// recheckSlack is added to the wait for a ValidAt time, so that a timer that
	// fires a little early does not find the content still refused.
	recheckSlack = time.Millisecond
)

// Engine runs a Spec over a Source: [Engine.Initial] loads the first value,
// [Engine.Run] follows the source, [Engine.Check] and [Engine.Trigger] re-read it
// on demand.
type Engine[C, T any] struct {
	spec    Spec[C, T]
	src     Source[C]
	kick    chan struct{}
	recheck chan struct{} // the ValidAt timer fired

	started  atomic.Bool
	closing  chan struct{}
	closeOne sync.Once
	stopped  chan struct{}

	mu          sync.Mutex // serialises checks and guards the fields below
	pendingAt   time.Time  // when failing content was first seen; zero when none pends
	pendingKey  [32]byte   // the failing content last seen while pending
	retryDelay  time.Duration
	retryIn     time.Duration // >0: check again after this long (settle window)
	recheckAt   time.Time     // non-zero: check again when the Now clock reaches it (ValidAt)
	reported    bool          // lastFailKey has been reported
	lastFailKey [32]byte
	lastErr     error
	lastErrAt   time.Time
	failures    uint64
}

// Why a check runs. News (an explicit Check, a change notification) resets the
// settle backoff; a re-read of the same content without news is paced by it.
type cause int

const (
	causeCheck cause = iota // an explicit Check (Reloader.Reload): always validates
	causeEvent              // a change notification or a restarted watch
	causePoll               // a poll tick
	causeRetry              // the settle timer, or the ValidAt timer
)

// New returns an engine; nothing runs until Run.
func New[C, T any](src Source[C], spec Spec[C, T]) *Engine[C, T] {
	if spec.Now == nil {
		spec.Now = time.Now
	}
	if spec.AfterFunc == nil {
		spec.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if spec.ReadErrorKey == nil {
		spec.ReadErrorKey = error.Error
	}
	return &Engine[C, T]{spec: spec, src: src, kick: make(chan struct{}, 1), recheck: make(chan struct{}, 1),
		closing: make(chan struct{}), stopped: make(chan struct{})}
}

// Initial reads and validates the first value, retrying with backoff for up to wait.
func (e *Engine[C, T]) Initial(ctx context.Context, wait time.Duration) (T, error) {
	deadline := time.Now().Add(wait)
	delay := 100 * time.Millisecond
	for {
		c, err := e.src.Read(ctx)
		var v T
		if err == nil {
			if v, err = e.spec.Validate(c); err == nil {
				return v, nil
			}
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return v, err
		}
		t := time.NewTimer(min(delay, remaining))
		select {
		case <-ctx.Done():
			t.Stop()
			// One line, the content's error first: it is what the user must fix.
			return v, fmt.Errorf("%w (stopped waiting: %w)", err, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// Trigger asks for a re-read soon; it never blocks and coalesces.
func (e *Engine[C, T]) Trigger() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Status is the engine's failure state.
type Status struct {
	// LastError is the last reported failure, nil once good content was seen
	// after it.
	LastError error
	// LastErrorAt is when LastError was reported.
	LastErrorAt time.Time
	// Failures counts the failures reported since New.
	Failures uint64
}

// Status returns the last reported failure (nil once good content was seen after it).
func (e *Engine[C, T]) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{Failures: e.failures}
	if e.reported {
		st.LastError, st.LastErrorAt = e.lastErr, e.lastErrAt
	}
	return st
}

// Run follows the source until ctx is done or Close is called. It may run once.
func (e *Engine[C, T]) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("reload: already started")
	}
	defer close(e.stopped)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	var watchers sync.WaitGroup
	defer watchers.Wait()
	watchers.Go(func() { e.watch(ctx) })

	var tick <-chan time.Time
	if e.spec.Poll > 0 {
		t := time.NewTicker(e.spec.Poll)
		defer t.Stop()
		tick = t.C
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var recheck validAtTimer
	defer recheck.stop()

	for {
		var why cause
		select {
		case <-ctx.Done():
			return nil
		case <-e.kick:
			why = causeEvent
		case <-tick:
			why = causePoll
		case <-retry.C:
			why = causeRetry
		case <-e.recheck:
			why = causeRetry
			recheck.fired()
		}
		_ = e.check(ctx, why)
		e.mu.Lock()
		in, at := e.retryIn, e.recheckAt
		e.mu.Unlock()
		retry.Stop()
		if in > 0 {
			retry.Reset(in)
		}
		recheck.set(at, e.spec.Now, e.spec.AfterFunc, e.recheck)
	}
}

// validAtTimer waits, on the validation clock, for the time at which a refusal
// may turn into acceptance (Spec.ValidAt). It belongs to Run's goroutine.
type validAtTimer struct {
	at     time.Time   // the time waited for; zero when none
	cancel func() bool // stops the wait
}

// set makes the timer wait for at (zero: for nothing), signalling on ch when the
// clock now reaches it — at once when it already has. Waiting for the same time
// again keeps the running wait.
func (t *validAtTimer) set(at time.Time, now func() time.Time, afterFunc func(time.Duration, func()) func() bool, ch chan struct{}) {
	if at.Equal(t.at) {
		return
	}
	t.stop()
	if at.IsZero() {
		return
	}
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	t.at = at
	d := at.Sub(now())
	if d <= 0 {
		// Reached already (a fake clock moved while the check ran): no timer
		// could see it pass.
		signal()
		return
	}
	t.cancel = afterFunc(d+recheckSlack, signal)
}

// fired notes that the wait ended, so that waiting for the same time again (the
// clock reached it, the content is still refused for it) starts a new one.
func (t *validAtTimer) fired() { t.at, t.cancel = time.Time{}, nil }

func (t *validAtTimer) stop() {
	if t.cancel != nil {
		t.cancel()
	}
	t.at, t.cancel = time.Time{}, nil
}

// watch runs the source's Watch, restarting it with backoff: a watch error never
// ends reloading (polling covers the gap).
func (e *Engine[C, T]) watch(ctx context.Context) {
	delay := time.Second
	for {
		err := e.src.Watch(ctx, e.Trigger)
		if ctx.Err() != nil {
			return
		}
		if err != nil && e.spec.WatchFailed != nil {
			e.spec.WatchFailed(err, delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		e.Trigger() // anything may have changed while no watch was up
		delay = min(2*delay, maxWatchRetry)
	}
}

// Close stops Run and waits for its goroutines. Safe to call more than once, and
// before or without Run.
func (e *Engine[C, T]) Close() {
	e.closeOne.Do(func() { close(e.closing) })
	if e.started.Load() {
		<-e.stopped
	}
}

// Check re-reads the source now and publishes or rejects the result. It returns nil
// when the value in use matches the source's current content, else the error. Check
// always validates what it reads, even content already reported as bad (a refusal
// may depend on the clock); it reports bad content only once.
func (e *Engine[C, T]) Check(ctx context.Context) error {
	err := e.check(ctx, causeCheck)
	e.mu.Lock()
	again := e.retryIn > 0 || !e.recheckAt.IsZero()
	e.mu.Unlock()
	if again {
		// This check, not Run's, found content to look at again later (mid-write, or
		// not valid yet): hand that to Run, whose timer does it.
		e.Trigger()
	}
	return err
}

func (e *Engine[C, T]) check(ctx context.Context, why cause) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.retryIn, e.recheckAt = 0, time.Time{}

	c, err := e.src.Read(ctx)
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: not the content's fault
	}
	var key [32]byte
	if err == nil {
		key = e.spec.Hash(c)
	} else {
		// A read error has no content; its key identifies it so that the same
		// missing file is reported once, not once per poll.
		key = sha256.Sum256([]byte("hotcert read error\x00" + e.spec.ReadErrorKey(err)))
	}
	if err == nil && key == e.spec.CurrentHash() {
		e.pendingAt, e.reported, e.lastErr = time.Time{}, false, nil
		return nil
	}
	seen := e.reported && key == e.lastFailKey
	if seen && why != causeCheck && e.validAt(e.lastErr).IsZero() {
		// Reported, and only new content can change the answer: no need to
		// validate it again on every poll or unrelated event.
		return e.lastErr
	}
	var v T
	if err == nil {
		v, err = e.spec.Validate(c)
	}
	if err == nil {
		e.pendingAt, e.reported, e.lastErr = time.Time{}, false, nil
		e.spec.Publish(v)
		return nil
	}
	if seen {
		// Reported already (once per distinct content): keep the answer current
		// and, if time may change it, look again then.
		e.lastErr = err
		e.scheduleRecheck(err)
		return err
	}

	now := time.Now()
	if e.pendingAt.IsZero() || why == causeCheck || why == causeEvent || key != e.pendingKey {
		// News: look again soon. Only re-reads of the same content without news
		// back off, so a write that is reported late, or merged with the one
		// before, never waits for a long backoff.
		e.retryDelay = firstRetry
	}
	if e.pendingAt.IsZero() {
		e.pendingAt = now
	}
	e.pendingKey = key
	if waited := now.Sub(e.pendingAt); waited < e.spec.Settle {
		// Maybe mid-write (certificate written, key not yet): look again soon, and
		// once more at the end of the window, before calling it a failure.
		e.retryIn = min(e.retryDelay, e.spec.Settle-waited)
		e.retryDelay *= 2
		return err
	}
	e.pendingAt = time.Time{}
	e.reported, e.lastFailKey, e.lastErr, e.lastErrAt = true, key, err, now
	e.failures++
	e.spec.Failed(err)
	e.scheduleRecheck(err)
	return err
}

// validAt returns when a refusal with err may turn into acceptance by the clock
// alone, or the zero time.
func (e *Engine[C, T]) validAt(err error) time.Time {
	if err == nil || e.spec.ValidAt == nil {
		return time.Time{}
	}
	return e.spec.ValidAt(err)
}

// scheduleRecheck makes Run check again when the clock may change err's answer.
func (e *Engine[C, T]) scheduleRecheck(err error) {
	e.recheckAt = e.validAt(err)
}
