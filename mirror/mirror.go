package mirror

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hotcert/hotcert"
)

// Source is what a Mirror follows: validated Material and its changes. A
// *hotcert.Reloader is one.
type Source interface {
	hotcert.Provider
	hotcert.Notifier
}

// Mirror writes what a [Source] holds into a directory and rewrites it on every
// change (see the package documentation for the files and how they are written).
type Mirror struct {
	cfg   config
	src   Source
	dir   string
	pw    *password // nil without WithPKCS12
	kick  chan struct{}
	unsub func()

	startOnce, closeOnce sync.Once
	closing              chan struct{}
	stopped              chan struct{}

	mu      sync.Mutex // serialises updates and guards what follows
	written map[string][32]byte
	st      Status
	failKey string // the failure last reported; "" after a success
	tries   uint64 // updates attempted, for tests
}

// Status is a point-in-time view of a Mirror, for health endpoints. It holds
// names, times and counts, never key material.
type Status struct {
	// Dir is the directory written to.
	Dir string
	// Generation is the generation of the Material the directory holds
	// (hotcert.Material.Generation); Written the time of its last update.
	Generation uint64
	Written    time.Time
	// NotBefore and NotAfter bound the validity of what the directory holds
	// (hotcert.Material.NotBefore and NotAfter).
	NotBefore, NotAfter time.Time
	// Files names the files the directory holds.
	Files []string
	// InSync is true while the directory holds the Material in use, with the
	// password in use.
	InSync bool
	// Updates counts the updates written since New, the first included.
	Updates uint64
	// LastError is the last failure, nil once an update succeeded after it;
	// LastReason its Reason constant, LastErrorAt when it was reported.
	LastError   error
	LastReason  string
	LastErrorAt time.Time
	// Failures counts the distinct failures reported since New.
	Failures uint64
}

// New writes the Material src holds into dir (created, mode 0755, if missing) and
// returns a Mirror; call [Mirror.Start] to follow changes. A password file that
// is missing or refused, or a first write that fails, is an error: nothing is
// left half-done in dir. Temporary files a stopped Mirror left in dir are
// removed.
func New(ctx context.Context, src Source, dir string, opts ...Option) (*Mirror, error) {
	c := defaultConfig()
	for _, o := range opts {
		o.ApplyReload(&c)
	}
	if dir == "" {
		return nil, errors.New("mirror: no directory to write to")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	if err := removeStaleTemps(dir); err != nil {
		return nil, err
	}
	m := &Mirror{cfg: c, src: src, dir: dir, kick: make(chan struct{}, 1), written: map[string][32]byte{},
		closing: make(chan struct{}), stopped: make(chan struct{}), st: Status{Dir: dir}}
	if c.passwordFile != "" {
		pw, err := newPassword(ctx, c.passwordFile, &m.cfg, m.trigger, m.passwordFailed)
		if err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
		m.pw = pw
	}
	// Subscribed before the first write: a change that lands while it runs is
	// delivered to Start.
	m.unsub = src.Subscribe(func(_, _ *hotcert.Material) { m.trigger() })
	if err := m.update(); err != nil {
		m.unsub()
		return nil, err
	}
	return m, nil
}

// Start follows the Source and the password file until ctx is done or Close is
// called, rewriting the directory on every change. It blocks, returns nil on a
// normal stop, and may be called once.
func (m *Mirror) Start(ctx context.Context) error {
	started := false
	m.startOnce.Do(func() { started = true })
	if !started {
		return errors.New("mirror: already started")
	}
	defer close(m.stopped)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	if m.pw != nil {
		wg.Go(func() {
			if err := m.pw.engine.Run(ctx); err != nil {
				m.cfg.reload.Logger.Error("mirror: following the password file failed", append(m.cfg.reload.Attrs(), "error", err.Error())...)
			}
		})
	}
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.kick:
		case <-retry:
		}
		retry = nil
		if err := m.update(); err != nil {
			retry = time.After(m.cfg.retry)
		}
	}
}

// Close stops Start and waits for it to return. It is safe to call more than
// once, and without Start.
func (m *Mirror) Close() error {
	m.closeOnce.Do(func() {
		close(m.closing)
		m.unsub()
		if m.pw != nil {
			m.pw.engine.Close()
		}
	})
	started := true
	m.startOnce.Do(func() { started = false })
	if started {
		<-m.stopped
	}
	return nil
}

// Status returns what the directory holds and the last failure.
func (m *Mirror) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st
	st.Files = append([]string(nil), st.Files...)
	return st
}

// Dir returns the directory written to.
func (m *Mirror) Dir() string { return m.dir }

func (m *Mirror) trigger() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// update writes the files whose inputs changed since the last update.
func (m *Mirror) update() error {
	// The password's failure state, read before m.mu: the password engine holds
	// its lock when it calls passwordFailed, which takes m.mu.
	var pwErr error
	if m.pw != nil {
		pwErr = m.pw.engine.Status().LastError
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tries++
	mat := m.src.Current()
	var pw string
	if m.pw != nil {
		pw = m.pw.value()
	}
	outs, err := render(mat, m.pw != nil, pw, &m.cfg)
	if err != nil {
		m.failLocked(ReasonEncode, err)
		return err
	}
	initial := m.st.Updates == 0
	var changed []output
	names := make([]string, 0, len(outs))
	for _, o := range outs {
		names = append(names, o.name)
		if m.written[o.name] != o.key {
			changed = append(changed, o)
		}
	}
	if len(changed) > 0 {
		if err := writeFiles(m.dir, changed); err != nil {
			m.failLocked(ReasonWrite, err)
			return err
		}
		for _, o := range changed {
			m.written[o.name] = o.key
		}
	}
	m.st.Generation, m.st.Files, m.st.InSync = mat.Generation(), names, true
	m.st.NotBefore, m.st.NotAfter = mat.NotBefore(), mat.NotAfter()
	m.st.LastError, m.st.LastReason, m.failKey = nil, "", ""
	if pwErr != nil {
		// Still refused: the files keep the last good password, and say why.
		m.st.LastError, m.st.LastReason, m.failKey = pwErr, ReasonPassword, ReasonPassword+"\x00"+pwErr.Error()
	}
	if len(changed) == 0 {
		return nil
	}
	m.st.Written = time.Now()
	m.st.Updates++
	written := make([]string, len(changed))
	for i, o := range changed {
		written[i] = o.name
	}
	m.cfg.reload.Logger.Info("TLS material mirrored", m.writtenAttrs(mat, written)...)
	m.cfg.observer.ObserveWritten(m.cfg.reload.Component, written, initial)
	return nil
}

// writtenAttrs describes an update for its log line: public data only.
func (m *Mirror) writtenAttrs(mat *hotcert.Material, files []string) []any {
	a := append(m.cfg.reload.Attrs(), "dir", m.dir, "files", strings.Join(files, ","), "generation", mat.Generation())
	if l := mat.Leaf(); l != nil {
		a = append(a, "serial", hotcert.FormatSerial(l.SerialNumber), "sha256", mat.LeafFingerprint().String())
	}
	if mat.HasTrust() {
		a = append(a, "ca_certificates", len(mat.TrustCertificates()))
	}
	return a
}

// passwordFailed reports a refused password file (the reload engine calls it
// once per distinct bad content).
func (m *Mirror) passwordFailed(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failLocked(ReasonPassword, err)
}

// failLocked logs and counts a failure once: the same failure again (a retry of
// a write that fails the same way) is not reported again. The directory keeps
// its files.
func (m *Mirror) failLocked(reason string, err error) {
	m.st.InSync = reason == ReasonPassword && m.st.InSync // a refused password leaves the files as good as they were
	m.st.LastError, m.st.LastReason = err, reason
	key := reason + "\x00" + err.Error()
	if key == m.failKey {
		return
	}
	m.failKey = key
	m.st.LastErrorAt = time.Now()
	m.st.Failures++
	m.cfg.reload.Logger.Error("TLS mirror update failed",
		append(m.cfg.reload.Attrs(), "dir", m.dir, "reason", reason, "error", err.Error())...)
	m.cfg.observer.ObserveFailure(m.cfg.reload.Component, reason)
}
