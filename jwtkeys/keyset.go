package jwtkeys

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
)

// KeySet signs tokens with its current key and verifies tokens signed by any key
// that is still valid: the signing key, keys its source lists for verification, and
// keys a rotation retired within their grace period. It follows its [Source] with
// the same engine as hotcert.Reloader: it re-reads on change notifications and poll
// ticks, ignores content it already serves (SHA-256), validates before it swaps,
// keeps the last good key set when new content is bad, and logs and counts each
// distinct change or failure once.
//
// Signing and verification read an immutable snapshot through an atomic pointer:
// they take no lock. A KeySet is a [Verifier] and an [Issuer].
type KeySet struct {
	cfg    config
	src    Source
	engine *reload.Engine[Content, *Material]

	mu      sync.Mutex // serialises state changes (publish and expiry)
	cur     atomic.Pointer[state]
	changed chan struct{} // wakes the expiry loop after a publish
}

var (
	_ Verifier = (*KeySet)(nil)
	_ Issuer   = (*KeySet)(nil)
)

// New performs the first load of src and returns a KeySet serving it. A source that
// cannot be read or content that does not validate is an error (retried for up to
// [WithInitialWait]): a KeySet never starts empty. Call [KeySet.Start] to follow
// changes.
func New(ctx context.Context, src Source, opts ...Option) (*KeySet, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.ApplyReload(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ks := &KeySet{cfg: cfg, src: src, changed: make(chan struct{}, 1)}
	if l, ok := src.(hotcert.SourceLogger); ok {
		l.SetDefaultLogger(cfg.reload.Logger.With(ks.attrs()...)) // a source that logs (a lost watch) logs here
	}
	ks.engine = reload.New[Content, *Material](src, reload.Spec[Content, *Material]{
		Hash:         Content.Hash,
		Validate:     Validate,
		CurrentHash:  func() [32]byte { return ks.cur.Load().mat.hash },
		Publish:      ks.publish,
		Failed:       ks.failed,
		ReadErrorKey: hotcert.ReadErrorKey,
		WatchFailed: func(err error, retryIn time.Duration) {
			cfg.reload.Logger.Warn("JWT key source watch failed; relying on polling until it restarts",
				append(ks.attrs(), "source", src.String(), "error", err.Error(), "retry_in", retryIn.String())...)
		},
		Settle: cfg.reload.Settle,
		Poll:   cfg.reload.Poll,
	})
	m, err := ks.engine.Initial(ctx, cfg.reload.InitialWait)
	if err != nil {
		// As hotcert.New: a content error names its input and what is wrong with
		// it, so it is the message; another error is said of the source.
		var he *hotcert.Error
		if errors.As(err, &he) && he.Input != "" {
			return nil, fmt.Errorf("jwtkeys: %w", err)
		}
		return nil, fmt.Errorf("jwtkeys: reading %s: %w", src, err)
	}
	st := newState(nil, m, cfg.now(), cfg.grace)
	ks.cur.Store(st)
	cfg.reload.Logger.Info("JWT signing keys loaded", append(ks.attrs(),
		"kid", m.signer.id, "alg", m.signer.alg, "verification_keys", len(m.listed),
		"source", m.source, "generation", st.generation)...)
	cfg.observer.ObserveLoad(cfg.reload.Component, ks.info(st), true)
	return ks, nil
}

// Start follows the source until ctx is done or Close is called, and retires keys
// whose grace period ended (they stop verifying at their deadline whether or not
// Start runs; Start logs it, updates metrics and prunes them). It blocks, returns nil
// on a normal stop, and may be called once.
func (ks *KeySet) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ks.expireLoop(ctx) })
	err := ks.engine.Run(ctx) // returns on ctx or Close
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("jwtkeys: %w", err)
	}
	return nil
}

// Close stops Start and waits for its goroutines. It is safe to call more than
// once, and before or without Start.
func (ks *KeySet) Close() error {
	ks.engine.Close()
	return nil
}

// Reload re-reads the source now and returns once the result is published or
// rejected: nil when the content in use is the source's current content, the
// validation error otherwise (the last good key set keeps serving).
func (ks *KeySet) Reload(ctx context.Context) error { return ks.engine.Check(ctx) }

// Trigger asks the KeySet to re-read its source soon. It never blocks.
func (ks *KeySet) Trigger() { ks.engine.Trigger() }

// SetInfo describes a key set at one moment. It holds no key material.
type SetInfo struct {
	// SigningKeyID and Algorithm describe the key that signs.
	SigningKeyID string
	Algorithm    string
	// Keys lists every key that verifies: the signer, the listed keys, then the
	// retired keys still inside their grace period, newest first.
	Keys []KeyInfo
	// Generation counts published key sets: 1 for the first load.
	Generation uint64
	// LoadedAt is when the content in use was validated.
	LoadedAt time.Time
	// Source describes where the content in use was read from.
	Source string
}

// Info describes the key set in use.
func (ks *KeySet) Info() SetInfo { return ks.info(ks.cur.Load()) }

func (ks *KeySet) info(st *state) SetInfo {
	return SetInfo{
		SigningKeyID: st.mat.signer.id, Algorithm: st.mat.signer.alg,
		Keys: st.keys(ks.cfg.now()), Generation: st.generation,
		LoadedAt: st.mat.loadedAt, Source: st.mat.source,
	}
}

// SigningKeyID returns the kid new tokens are signed with.
func (ks *KeySet) SigningKeyID() string { return ks.cur.Load().mat.signer.id }

// GracePeriod returns how long a retired key keeps verifying.
func (ks *KeySet) GracePeriod() time.Duration { return ks.cfg.grace }

// MaxTokenTTL returns the longest lifetime Issue and Sign accept.
func (ks *KeySet) MaxTokenTTL() time.Duration { return ks.cfg.maxTTL }

// Status is a point-in-time view of a KeySet, for health endpoints and tools: the
// key set in use and the failure state, in the shape every hotcert reloader reports
// (hotcert.StatusOf).
type Status = hotcert.StatusOf[SetInfo]

// Status returns the KeySet's current status.
func (ks *KeySet) Status() Status {
	st := ks.engine.Status()
	return Status{Current: ks.Info(), LastError: st.LastError, LastErrorAt: st.LastErrorAt, Failures: st.Failures}
}

// publish makes m the material in use; it runs on the engine's goroutine.
func (ks *KeySet) publish(m *Material) {
	ks.mu.Lock()
	prev := ks.cur.Load()
	now := ks.cfg.now()
	st := newState(prev, m, now, ks.cfg.grace)
	ks.cur.Store(st)
	ks.mu.Unlock()
	select {
	case ks.changed <- struct{}{}:
	default:
	}

	attrs := append(ks.attrs(), "kid", m.signer.id, "alg", m.signer.alg)
	if old := prev.mat.signer; old.id != m.signer.id {
		attrs = append(attrs, "previous_kid", old.id, "previous_alg", old.alg)
		if e, ok := st.byID[old.id]; ok && e.state == KeyRetired {
			attrs = append(attrs, "previous_verifies_until", e.until.UTC().Format(time.RFC3339))
		} else if ok {
			attrs = append(attrs, "previous_state", string(e.state))
		}
		ks.cfg.reload.Logger.Info("JWT signing key rotated", append(attrs, ks.diffAttrs(prev, st)...)...)
	} else {
		ks.cfg.reload.Logger.Info("JWT verification keys reloaded", append(attrs, ks.diffAttrs(prev, st)...)...)
	}
	ks.cfg.observer.ObserveLoad(ks.cfg.reload.Component, ks.info(st), false)
}

// diffAttrs names the keys that started and stopped verifying, and the rest of a
// reload line's attributes.
func (ks *KeySet) diffAttrs(prev, next *state) []any {
	var added, removed []string
	for id := range next.byID {
		if _, ok := prev.byID[id]; !ok {
			added = append(added, id)
		}
	}
	for id, e := range prev.byID {
		if _, ok := next.byID[id]; !ok && (e.state != KeyRetired || ks.cfg.now().Before(e.until)) {
			removed = append(removed, id)
		}
	}
	a := []any{"verification_keys", len(next.byID)}
	if len(added) > 0 {
		a = append(a, "added", strings.Join(slices.Sorted(slices.Values(added)), ","))
	}
	if len(removed) > 0 {
		a = append(a, "removed", strings.Join(slices.Sorted(slices.Values(removed)), ","))
	}
	return append(a, "source", next.mat.source, "generation", next.generation)
}

func (ks *KeySet) failed(err error) {
	ks.cfg.reload.Logger.Error("JWT signing key reload failed", append(ks.attrs(),
		"source", ks.src.String(), "reason", string(hotcert.ReasonOf(err)), "error", err.Error())...)
	ks.cfg.observer.ObserveFailure(ks.cfg.reload.Component, err)
}

// expireLoop prunes retired keys when their grace period ends.
func (ks *KeySet) expireLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		ks.expire()
		t.Stop()
		if next := ks.cur.Load().nextExpiry(); !next.IsZero() {
			t.Reset(max(next.Sub(ks.cfg.now()), 0) + time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-ks.changed:
		case <-t.C:
		}
	}
}

// expire drops the retired keys whose grace period ended, once each.
func (ks *KeySet) expire() {
	ks.mu.Lock()
	st, gone := ks.cur.Load().withoutExpired(ks.cfg.now())
	if len(gone) > 0 {
		ks.cur.Store(st)
	}
	ks.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	for _, r := range gone {
		ks.cfg.reload.Logger.Info("JWT retired key left its grace period", append(ks.attrs(),
			"kid", r.k.id, "alg", r.k.alg, "retired_at", r.at.UTC().Format(time.RFC3339),
			"verified_until", r.verifies.UTC().Format(time.RFC3339))...)
	}
	ks.cfg.observer.ObserveKeys(ks.cfg.reload.Component, ks.info(st))
}

// attrs are the attributes every line starts with: the component under the shared
// log key (hotcert.WithComponentLabel), then hotcert.WithLogAttrs' attributes.
func (ks *KeySet) attrs() []any { return ks.cfg.reload.Attrs() }
