package hotcert

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hotcert/hotcert/reload"
)

// Reloader keeps a [Store] in step with a [Source]: it re-reads the source on every
// change notification and poll tick, ignores content it has already seen (SHA-256),
// validates new content, and publishes it only when it is good. Failing content keeps
// the last good Material serving; it is treated as "maybe mid-write" for the settle
// window, then logged and counted once, and retried whenever the source changes again
// — and, for a certificate not valid yet, again at its NotBefore ([ValidFrom]).
//
// A Reloader is a [Provider] and a [Notifier]. Reads of [Reloader.Current] take no
// lock and allocate nothing.
type Reloader struct {
	cfg    reloaderConfig
	src    Source
	store  *Store
	engine *reload.Engine[Content, *Material]
}

var (
	_ Provider = (*Reloader)(nil)
	_ Notifier = (*Reloader)(nil)
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
	r := &Reloader{cfg: cfg, src: src, store: NewStore(nil)}
	handLogger(src, &cfg.Settings)
	r.engine = reload.New[Content, *Material](src, reload.Spec[Content, *Material]{
		Hash:         Content.Hash,
		Validate:     func(c Content) (*Material, error) { return Validate(c, cfg.validateOpts...) },
		CurrentHash:  func() [32]byte { return r.store.Current().ContentHash() },
		Publish:      r.publish,
		Failed:       r.failed,
		ReadErrorKey: ReadErrorKey,
		WatchFailed: func(err error, retryIn time.Duration) {
			r.cfg.Logger.Warn("TLS source watch failed; relying on polling until it restarts",
				append(r.logAttrs(), "source", src.String(), "error", err.Error(), "retry_in", retryIn.String())...)
		},
		Settle:    cfg.Settle,
		Poll:      cfg.Poll,
		ValidAt:   ValidFrom,
		Now:       validationClock(cfg.validateOpts).Now,
		AfterFunc: validationClock(cfg.validateOpts).AfterFunc,
	})
	m, err := r.engine.Initial(ctx, cfg.InitialWait)
	if err != nil {
		return nil, firstLoadError(src, err)
	}
	m = m.withGeneration(1)
	r.store.Set(m)
	r.cfg.Logger.Info(r.cfg.loadMessage(m, true), r.materialAttrs(m)...)
	r.cfg.observer.ObserveLoad(r.cfg.Component, m, true)
	if o, ok := r.cfg.observer.(NeverUpdatedObserver); ok {
		if files, ok := neverUpdated(src); ok {
			o.ObserveNeverUpdated(r.cfg.Component, files)
		}
	}
	return r, nil
}

// firstLoadError is New's error for a first load that failed with err. Content
// errors ([*Error]) start with the input they are about and say what is wrong with
// it ("/tls/tls.crt: certificate chain holds no certificate"): that is the message,
// without the source's description, which would only name the file again. An error
// that names no input is said of the source.
func firstLoadError(src Source, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Input != "" {
		return fmt.Errorf("hotcert: %w", err)
	}
	return fmt.Errorf("hotcert: reading %s: %w", src, err)
}

// Current returns the Material in use. It never returns nil.
func (r *Reloader) Current() *Material { return r.store.Current() }

// Subscribe implements [Notifier]: fn runs after every swap, coalesced.
func (r *Reloader) Subscribe(fn func(prev, next *Material)) func() { return r.store.Subscribe(fn) }

// NeedLeaderElection returns false: added to a leader-elected controller-runtime
// manager (mgr.Add), a Reloader runs on every replica, since each serves its own TLS.
func (r *Reloader) NeedLeaderElection() bool { return false }

// Status returns the Reloader's current status.
func (r *Reloader) Status() Status {
	st := r.engine.Status()
	return Status{Current: r.store.Current(), LastError: st.LastError, LastErrorAt: st.LastErrorAt, Failures: st.Failures}
}

// Trigger asks the Reloader to re-read its source soon. It never blocks; triggers
// that arrive while one is pending are coalesced.
func (r *Reloader) Trigger() { r.engine.Trigger() }

// Reload re-reads the source now, on the caller's goroutine, and returns once the
// result is published (or rejected). It always validates what it reads, so content
// refused earlier because it was not valid yet is accepted once it is. It returns
// nil when the content in use is the source's current content, and the validation
// error otherwise (the last good Material keeps serving; bad content is still
// logged and counted once). Use it to re-read per connection, as an agent that
// re-reads its CA bundle on every dial does.
func (r *Reloader) Reload(ctx context.Context) error { return r.engine.Check(ctx) }

// Start follows the source until ctx is done or Close is called. It blocks, and
// returns nil on a normal stop. It may be called once.
func (r *Reloader) Start(ctx context.Context) error {
	if err := r.engine.Run(ctx); err != nil {
		return fmt.Errorf("hotcert: %w", err)
	}
	return nil
}

// Close stops Start and waits for its goroutines to end. It is safe to call more
// than once, and before or without Start.
func (r *Reloader) Close() error {
	r.engine.Close()
	return nil
}

func (r *Reloader) publish(m *Material) {
	m = m.withGeneration(r.store.Current().Generation() + 1)
	r.store.Set(m)
	r.cfg.Logger.Info(r.cfg.loadMessage(m, false), r.materialAttrs(m)...)
	r.cfg.observer.ObserveLoad(r.cfg.Component, m, false)
}

func (r *Reloader) failed(err error) {
	a := append(r.logAttrs(), "source", r.src.String(), "reason", string(ReasonOf(err)), "error", err.Error())
	if at := ValidFrom(err); !at.IsZero() {
		// Not a final refusal: say when the content is looked at again.
		a = append(a, "recheck_at", at.UTC().Format(time.RFC3339))
	}
	r.cfg.Logger.Error(r.cfg.msgFailed, a...)
	r.cfg.observer.ObserveFailure(r.cfg.Component, err)
}

// logAttrs are the attributes every line of r starts with.
func (r *Reloader) logAttrs() []any { return r.cfg.Attrs() }

// materialAttrs describes m for a log line: identifying, public data only.
func (r *Reloader) materialAttrs(m *Material) []any {
	a := r.logAttrs()
	if leaf := m.Leaf(); leaf != nil {
		a = append(a,
			"serial", FormatSerial(leaf.SerialNumber),
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
