package hotcert_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// memSource is an in-memory hotcert.Source: Set changes its content and notifies.
type memSource struct {
	mu      sync.Mutex
	content hotcert.Content
	err     error
	reads   atomic.Int64
	watch   chan struct{}
	silent  bool // Set does not notify (to test polling)
}

func newMemSource(c hotcert.Content) *memSource {
	return &memSource{content: c, watch: make(chan struct{}, 16)}
}

func (s *memSource) Set(c hotcert.Content, err error) {
	s.mu.Lock()
	s.content, s.err = c, err
	s.mu.Unlock()
	if !s.silent {
		s.watch <- struct{}{}
	}
}

func (s *memSource) Read(context.Context) (hotcert.Content, error) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.content, s.err
}

func (s *memSource) Watch(ctx context.Context, changed func()) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.watch:
			changed()
		}
	}
}

func (s *memSource) String() string { return "memory" }

type harness struct {
	src  *memSource
	r    *hotcert.Reloader
	obs  *testutil.Observer
	logs *testutil.LogBuffer
}

func startReloader(t *testing.T, c hotcert.Content, opts ...hotcert.Option) *harness {
	t.Helper()
	h := &harness{src: newMemSource(c), obs: &testutil.Observer{}, logs: &testutil.LogBuffer{}}
	logger := slog.New(slog.NewTextHandler(h.logs, nil))
	opts = append([]hotcert.Option{hotcert.WithLogger(logger), hotcert.WithObserver(h.obs), hotcert.WithComponent("test"), hotcert.WithPollInterval(0)}, opts...)
	r, err := hotcert.New(context.Background(), h.src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	done := make(chan error, 1)
	go func() { done <- r.Start(context.Background()) }()
	t.Cleanup(func() {
		r.Close()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
	return h
}

func serial(m *hotcert.Material) string { return m.Leaf().SerialNumber.String() }

func TestReloaderSwapsGoodContentAndKeepsLastGood(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a, b, c := ca.MustIssue(), ca.MustIssue(), ca.MustIssue()
	h := startReloader(t, identity(a), hotcert.WithSettle(50*time.Millisecond))
	if g := h.r.Current().Generation(); g != 1 {
		t.Fatalf("first generation %d", g)
	}

	h.src.Set(identity(b), nil)
	testutil.WaitFor(t, "b served", func() bool { return serial(h.r.Current()) == b.Cert.SerialNumber.String() })

	bad := identity(c)
	bad.Key.Data = a.KeyPEM // mismatch
	h.src.Set(bad, nil)
	testutil.WaitFor(t, "failure reported", func() bool { return len(h.obs.Failures()) == 1 })
	if serial(h.r.Current()) != b.Cert.SerialNumber.String() {
		t.Fatal("bad content replaced the last good material")
	}
	// The same bad content, seen again (poll, resync, spurious event), is not counted again.
	for range 5 {
		if err := h.r.Reload(context.Background()); hotcert.ReasonOf(err) != hotcert.ReasonKeyMismatch {
			t.Fatalf("Reload = %v, want key mismatch", err)
		}
	}
	if f := len(h.obs.Failures()); f != 1 || h.logs.Count("TLS certificate reload failed") != 1 {
		t.Fatalf("failures counted %d, logged %d; want 1 each", f, h.logs.Count("TLS certificate reload failed"))
	}
	st := h.r.Status()
	if st.LastError == nil || st.Failures != 1 {
		t.Fatalf("status %+v", st)
	}

	h.src.Set(identity(c), nil) // the next good write recovers
	testutil.WaitFor(t, "c served", func() bool { return serial(h.r.Current()) == c.Cert.SerialNumber.String() })
	testutil.WaitFor(t, "the reload to be observed", func() bool { return h.obs.Loads() >= 2 }) // observed just after publication
	if loads, f := h.obs.Loads(), len(h.obs.Failures()); loads != 2 || f != 1 {
		t.Fatalf("loads %d failures %d, want 2 and 1", loads, f)
	}
	if h.r.Current().Generation() != 3 || h.r.Status().LastError != nil {
		t.Fatalf("generation %d, last error %v", h.r.Current().Generation(), h.r.Status().LastError)
	}
	if n := h.logs.Count("TLS certificate reloaded"); n != 2 {
		t.Fatalf("%d reload lines, want 2", n)
	}
	assertNoKeyMaterial(t, h.logs.String(), a, b, c)
}

func TestReloaderIdenticalContentIsNoChange(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a := ca.MustIssue()
	h := startReloader(t, identity(a))
	renamed := identity(a)
	renamed.Cert.Name, renamed.Key.Name = "/elsewhere/tls.crt", "/elsewhere/tls.key"
	// Change notifications are coalesced: wait for each one's read before the next,
	// so that the renamed content is surely read several times.
	for range 3 {
		before := h.src.reads.Load()
		h.src.Set(renamed, nil)
		testutil.WaitFor(t, "a read of the renamed content", func() bool { return h.src.reads.Load() > before })
	}
	if err := h.r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if loads, f := h.obs.Loads(), len(h.obs.Failures()); loads != 0 || f != 0 || h.r.Current().Generation() != 1 {
		t.Fatalf("identical content caused loads=%d failures=%d generation=%d", loads, f, h.r.Current().Generation())
	}
}

func TestReloaderSettleWindowAbsorbsNonAtomicWrites(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	h := startReloader(t, identity(a), hotcert.WithSettle(5*time.Second))
	half := identity(b)
	half.Key.Data = a.KeyPEM // certificate written, key not yet
	h.src.Set(half, nil)
	testutil.WaitFor(t, "mid-write content read", func() bool { return h.src.reads.Load() >= 1 })
	h.src.Set(identity(b), nil) // key written
	testutil.WaitFor(t, "b served", func() bool { return serial(h.r.Current()) == b.Cert.SerialNumber.String() })
	if f := len(h.obs.Failures()); f != 0 || h.logs.Count("TLS certificate reload failed") != 0 {
		t.Fatal("a mismatch inside the settle window was reported as a failure")
	}
}

func TestReloaderSettleWindowEndsInOneFailure(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	h := startReloader(t, identity(a), hotcert.WithSettle(100*time.Millisecond))
	bad := identity(b)
	bad.Key.Data = a.KeyPEM
	h.src.Set(bad, nil) // one event only: the retry timer must finish the job
	testutil.WaitFor(t, "failure after settle", func() bool { return len(h.obs.Failures()) == 1 })
	reads := h.src.reads.Load()
	time.Sleep(300 * time.Millisecond) // no hot loop once reported: reads stay put
	if got := h.src.reads.Load(); got != reads {
		t.Fatalf("reloader kept re-reading after reporting: %d -> %d reads", reads, got)
	}
}

func TestReloaderReadErrorCountedOnce(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a := ca.MustIssue()
	h := startReloader(t, identity(a), hotcert.WithSettle(0))
	missing := &hotcert.Error{Input: "/tls/tls.crt", Reason: hotcert.ReasonMissing, Detail: "does not exist"}
	h.src.Set(hotcert.Content{}, missing)
	h.src.Set(hotcert.Content{}, missing)
	testutil.WaitFor(t, "failure", func() bool { return len(h.obs.Failures()) == 1 })
	_ = h.r.Reload(context.Background())
	if f := len(h.obs.Failures()); f != 1 {
		t.Fatalf("%d failures for one missing file", f)
	}
	if !strings.Contains(h.logs.String(), "/tls/tls.crt: does not exist") || !strings.Contains(h.logs.String(), "component=test") {
		t.Fatalf("failure line lacks input or listener: %s", h.logs.String())
	}
	h.src.Set(identity(a), nil) // back to the content in use: not a reload, but clears the failure
	testutil.WaitFor(t, "failure cleared", func() bool { return h.r.Status().LastError == nil })
}

func TestReloaderPollCatchesSilentChange(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	h := startReloader(t, identity(a), hotcert.WithPollInterval(20*time.Millisecond))
	h.src.silent = true
	h.src.Set(identity(b), nil)
	testutil.WaitFor(t, "poll picks up b", func() bool { return serial(h.r.Current()) == b.Cert.SerialNumber.String() })
}

func TestNewFailsFastAndWaits(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a := ca.MustIssue(hotcerttest.WithValidity(time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)))
	_, err := hotcert.New(context.Background(), newMemSource(identity(a)))
	if hotcert.ReasonOf(err) != hotcert.ReasonExpired || !strings.HasPrefix(err.Error(), "hotcert: /tls/tls.crt: leaf certificate (") {
		t.Fatalf("New with expired certificate: %v", err)
	}

	src := newMemSource(hotcert.Content{})
	src.err = &hotcert.Error{Input: "Secret ns/tls", Reason: hotcert.ReasonMissing, Detail: "not found"}
	good := ca.MustIssue()
	go func() {
		time.Sleep(150 * time.Millisecond)
		src.Set(identity(good), nil)
	}()
	r, err := hotcert.New(context.Background(), src, hotcert.WithInitialWait(10*time.Second))
	if err != nil {
		t.Fatalf("New with initial wait: %v", err)
	}
	r.Close()

	src2 := newMemSource(hotcert.Content{})
	src2.err = errors.New("boom")
	if _, err := hotcert.New(context.Background(), src2, hotcert.WithInitialWait(50*time.Millisecond)); err == nil {
		t.Fatal("New succeeded on a source that never became readable")
	}
}

// TestNewSaysWhatIsWrongOnce: New's error is the content's error, which names the
// input and what is wrong with it, with the package prefix and nothing else (the
// source's description would name the file a second time); an error that names no
// input is said of the source; a wait cut short by ctx stays one line.
func TestNewSaysWhatIsWrongOnce(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	empty := identity(ca.MustIssue())
	empty.Cert.Data = nil
	_, err := hotcert.New(context.Background(), newMemSource(empty))
	if got, want := fmt.Sprint(err), "hotcert: /tls/tls.crt: certificate chain holds no certificate"; got != want {
		t.Errorf("New with an empty certificate file:\n got %q\nwant %q", got, want)
	}

	src := newMemSource(hotcert.Content{})
	src.err = errors.New("connection refused")
	_, err = hotcert.New(context.Background(), src)
	if got, want := fmt.Sprint(err), "hotcert: reading memory: connection refused"; got != want {
		t.Errorf("New with a source error naming no input:\n got %q\nwant %q", got, want)
	}

	src.err = &hotcert.Error{Input: "Secret ns/tls", Reason: hotcert.ReasonMissing, Detail: "not found"}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = hotcert.New(ctx, src, hotcert.WithInitialWait(time.Hour))
	if got, want := fmt.Sprint(err), "hotcert: Secret ns/tls: not found (stopped waiting: context deadline exceeded)"; got != want || !errors.Is(err, context.DeadlineExceeded) || hotcert.ReasonOf(err) != hotcert.ReasonMissing {
		t.Errorf("New whose wait ctx ended:\n got %q\nwant %q (wrapping the deadline and the reason)", got, want)
	}
}

func TestReloaderCloseStopsEveryGoroutine(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	before := runtime.NumGoroutine()
	for range 5 {
		r, err := hotcert.New(context.Background(), newMemSource(identity(ca.MustIssue())), hotcert.WithPollInterval(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		unsub := r.Subscribe(func(_, _ *hotcert.Material) {})
		done := make(chan error)
		go func() { done <- r.Start(context.Background()) }()
		r.Trigger()
		unsub()
		r.Close()
		<-done
		r.Close() // idempotent
	}
	testutil.WaitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// A Reloader added to a leader-elected controller-runtime manager must run on every
// replica: controller-runtime asks its Runnables this interface (declared here, as
// the root module does not depend on controller-runtime).
func TestReloaderRunsOnEveryReplica(t *testing.T) {
	h := startReloader(t, identity(hotcerttest.MustNewCA().MustIssue()))
	le, ok := any(h.r).(interface{ NeedLeaderElection() bool })
	if !ok {
		t.Fatal("Reloader does not say whether it needs leader election: a manager would run it on the leader only")
	}
	if le.NeedLeaderElection() {
		t.Fatal("Reloader needs leader election: standby replicas would serve stale certificates")
	}
}

func TestStoreSubscribeCoalesces(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	mats := make([]*hotcert.Material, 50)
	for i := range mats {
		m, err := hotcert.Validate(identity(ca.MustIssue()))
		if err != nil {
			t.Fatal(err)
		}
		mats[i] = m
	}
	s := hotcert.NewStore(mats[0])
	release := make(chan struct{})
	var mu sync.Mutex
	var calls [][2]*hotcert.Material
	unsub := s.Subscribe(func(prev, next *hotcert.Material) {
		<-release
		mu.Lock()
		calls = append(calls, [2]*hotcert.Material{prev, next})
		mu.Unlock()
	})
	defer unsub()
	for _, m := range mats[1:] {
		s.Set(m)
	}
	close(release)
	testutil.WaitFor(t, "last material seen", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) > 0 && calls[len(calls)-1][1] == mats[len(mats)-1]
	})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) > 2 || calls[0][0] != mats[0] {
		t.Fatalf("%d callbacks for 49 changes (want coalesced to at most 2), first prev is the original: %v", len(calls), calls[0][0] == mats[0])
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] != calls[i-1][1] {
			t.Fatal("callbacks do not chain prev to the last next")
		}
	}
}

func TestCurrentDoesNotAllocate(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	r, err := hotcert.New(context.Background(), newMemSource(identity(ca.MustIssue())))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sink *hotcert.Material
	if n := testing.AllocsPerRun(1000, func() { sink = r.Current() }); n != 0 {
		t.Fatalf("Current allocates %v times per call", n)
	}
	_ = sink
}

// TestNotYetValidRenewalIsAdoptedOnceValid: a renewal that lands before its
// NotBefore is refused (once: one line, one count), but the refusal is not final:
// once the clock passes NotBefore, an explicit Reload, a change event and a poll
// each validate it again, and the renewal is served.
func TestNotYetValidRenewalIsAdoptedOnceValid(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	start := time.Now().Truncate(time.Second)
	old := ca.MustIssue(hotcerttest.WithValidity(start.Add(-time.Hour), start.Add(24*time.Hour)))
	renewal := ca.MustIssue(hotcerttest.WithValidity(start.Add(3*time.Second), start.Add(48*time.Hour)))

	for _, how := range []string{"Reload", "event", "poll"} {
		t.Run(how, func(t *testing.T) {
			clock := hotcerttest.NewFakeClock(start)
			opts := []hotcert.Option{hotcert.WithSettle(0), hotcert.WithValidation(hotcert.WithClock(clock.Now))}
			if how == "poll" {
				opts = append(opts, hotcert.WithPollInterval(5*time.Millisecond))
			}
			h := startReloader(t, identity(old), opts...)
			h.src.Set(identity(renewal), nil)
			testutil.WaitFor(t, "the refusal to be reported", func() bool { return len(h.obs.Failures()) == 1 })
			if got := hotcert.ReasonOf(h.obs.Failures()[0]); got != hotcert.ReasonNotYetValid {
				t.Fatalf("refused as %s, want not_yet_valid", got)
			}
			if at := hotcert.ValidFrom(h.obs.Failures()[0]); !at.Equal(renewal.Cert.NotBefore) {
				t.Fatalf("ValidFrom %v, want the renewal's NotBefore %v", at, renewal.Cert.NotBefore)
			}
			// Still too early: seen again, still refused, not counted or logged again.
			if err := h.r.Reload(context.Background()); hotcert.ReasonOf(err) != hotcert.ReasonNotYetValid {
				t.Fatalf("Reload before NotBefore = %v", err)
			}

			clock.Advance(3 * time.Second) // NotBefore reached
			switch how {
			case "Reload":
				if err := h.r.Reload(context.Background()); err != nil {
					t.Fatalf("Reload after NotBefore = %v, want the renewal accepted", err)
				}
			case "event":
				h.src.Set(identity(renewal), nil) // the same bytes, seen again (a resync, an unrelated event)
			}
			testutil.WaitFor(t, "the renewal to be served", func() bool { return serial(h.r.Current()) == renewal.Cert.SerialNumber.String() })
			if f, n := len(h.obs.Failures()), h.logs.Count("TLS certificate reload failed"); f != 1 || n != 1 {
				t.Fatalf("refusal counted %d times, logged %d times; want once each", f, n)
			}
			if !strings.Contains(h.logs.String(), "recheck_at=") {
				t.Errorf("the refusal line does not say when it is looked at again:\n%s", h.logs)
			}
			if h.r.Status().LastError != nil {
				t.Errorf("status still failing after the renewal was served")
			}
		})
	}
}

// TestNotYetValidRenewalIsAdoptedOnTheInjectedClock: the reloader waits for a
// refused renewal's NotBefore on the clock it validates with, so a test or a
// simulation that moves a fake clock past NotBefore sees the renewal served — with
// no event, no poll, no Reload, and no real waiting (NotBefore is an hour ahead).
func TestNotYetValidRenewalIsAdoptedOnTheInjectedClock(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := hotcerttest.NewFakeClock(start)
	old := ca.MustIssue(hotcerttest.WithValidity(start.Add(-time.Hour), start.Add(24*time.Hour)))
	renewal := ca.MustIssue(hotcerttest.WithValidity(start.Add(time.Hour), start.Add(48*time.Hour)))
	h := startReloader(t, identity(old), hotcert.WithSettle(0), hotcert.WithValidation(hotcert.WithTimerClock(clock))) // polling is off
	h.src.Set(identity(renewal), nil)
	testutil.WaitFor(t, "the refusal to be reported", func() bool { return len(h.obs.Failures()) == 1 })
	testutil.WaitFor(t, "the reloader to wait on the injected clock", func() bool { return clock.Waiting() == 1 })

	clock.Advance(30 * time.Minute) // not there yet: still waiting, still the old certificate
	if clock.Waiting() != 1 || serial(h.r.Current()) != old.Cert.SerialNumber.String() {
		t.Fatalf("half way to NotBefore: %d waits, serving %s", clock.Waiting(), serial(h.r.Current()))
	}
	clock.Advance(30*time.Minute + time.Second) // past NotBefore
	testutil.WaitFor(t, "the renewal to be served", func() bool { return serial(h.r.Current()) == renewal.Cert.SerialNumber.String() })
	if f := len(h.obs.Failures()); f != 1 {
		t.Fatalf("%d failures, want 1", f)
	}
	if clock.Waiting() != 0 {
		t.Errorf("%d waits left on the clock after the renewal was served", clock.Waiting())
	}
}

// TestNotYetValidRenewalIsAdoptedOnAReadOnlyClock: given only a clock to read
// (WithClock), the reloader still judges NotBefore by that clock, not the wall
// clock: moving the clock past an hour-away NotBefore serves the renewal (within
// the reloader's look at the clock once a second), with no event, poll or Reload.
func TestNotYetValidRenewalIsAdoptedOnAReadOnlyClock(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(start.UnixNano())
	read := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	old := ca.MustIssue(hotcerttest.WithValidity(start.Add(-time.Hour), start.Add(24*time.Hour)))
	renewal := ca.MustIssue(hotcerttest.WithValidity(start.Add(time.Hour), start.Add(48*time.Hour)))
	h := startReloader(t, identity(old), hotcert.WithSettle(0), hotcert.WithValidation(hotcert.WithClock(read))) // polling is off
	h.src.Set(identity(renewal), nil)
	testutil.WaitFor(t, "the refusal to be reported", func() bool { return len(h.obs.Failures()) == 1 })
	now.Store(start.Add(time.Hour + time.Second).UnixNano()) // past NotBefore
	testutil.WaitFor(t, "the renewal to be served", func() bool { return serial(h.r.Current()) == renewal.Cert.SerialNumber.String() })
	if f := len(h.obs.Failures()); f != 1 {
		t.Fatalf("%d failures, want 1", f)
	}
}

// TestNotYetValidRenewalIsRecheckedAtNotBefore: with no event, no poll and no
// Reload, the reloader itself looks again at the refused renewal's NotBefore.
func TestNotYetValidRenewalIsRecheckedAtNotBefore(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	now := time.Now()
	old := ca.MustIssue()
	// Certificate times have one-second resolution: NotBefore is 1 to 2 s ahead.
	notBefore := now.Truncate(time.Second).Add(2 * time.Second)
	renewal := ca.MustIssue(hotcerttest.WithValidity(notBefore, now.Add(48*time.Hour)))
	h := startReloader(t, identity(old), hotcert.WithSettle(0)) // polling is off
	h.src.Set(identity(renewal), nil)
	testutil.WaitFor(t, "the refusal to be reported", func() bool { return len(h.obs.Failures()) == 1 })
	reads := h.src.reads.Load()
	testutil.WaitFor(t, "the renewal to be served", func() bool { return serial(h.r.Current()) == renewal.Cert.SerialNumber.String() })
	if time.Now().Before(notBefore) {
		t.Fatal("served before its NotBefore")
	}
	if got := h.src.reads.Load() - reads; got > 3 {
		t.Errorf("%d re-reads while waiting for NotBefore; want one at NotBefore (no busy loop)", got)
	}
	if f := len(h.obs.Failures()); f != 1 {
		t.Fatalf("%d failures, want 1", f)
	}
}

// TestWithClockNilIsTheWallClock: a nil clock is time.Now, not a panic.
func TestReloaderWithClockNil(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	h := startReloader(t, identity(ca.MustIssue()), hotcert.WithValidation(hotcert.WithClock(nil)))
	next := ca.MustIssue()
	h.src.Set(identity(next), nil)
	testutil.WaitFor(t, "next served", func() bool { return serial(h.r.Current()) == next.Cert.SerialNumber.String() })
}

// TestOneComponentKeyOnEveryLine: load, reload, failure and watch lines all name the
// component under one key: "component" by default, the metrics' label name when
// WithComponentLabel sets it.
func TestOneComponentKeyOnEveryLine(t *testing.T) {
	for _, key := range []string{"", "listener"} {
		t.Run("key="+key, func(t *testing.T) {
			ca := hotcerttest.MustNewCA()
			a, b := ca.MustIssue(), ca.MustIssue()
			id := &failingWatch{memSource: newMemSource(identity(a)), failures: 1}
			logs := &testutil.LogBuffer{}
			opts := []hotcert.Option{hotcert.WithComponent("agent_grpc"), hotcert.WithSettle(0), hotcert.WithPollInterval(0),
				hotcert.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}
			if key != "" {
				opts = append(opts, hotcert.WithComponentLabel(key))
			}
			r, err := hotcert.New(context.Background(), id, opts...)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- r.Start(context.Background()) }()
			defer func() { r.Close(); <-done }()
			testutil.WaitFor(t, "the watch to restart", func() bool { return id.starts.Load() >= 2 })
			bad := identity(b)
			bad.Key.Data = a.KeyPEM
			id.Set(bad, nil)
			testutil.WaitFor(t, "the failure line", func() bool { return logs.Count("TLS certificate reload failed") == 1 })
			id.Set(identity(b), nil)
			testutil.WaitFor(t, "the reload line", func() bool { return logs.Count("TLS certificate reloaded") == 1 })

			want := key
			if want == "" {
				want = "component"
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 4 {
				t.Fatalf("%d lines, want load, watch failure, failure, reload:\n%s", len(lines), logs)
			}
			for _, line := range lines {
				if !strings.Contains(line, " "+want+"=agent_grpc") {
					t.Errorf("line lacks %s=agent_grpc: %s", want, line)
				}
				for _, other := range []string{"component", "listener"} {
					if other != want && strings.Contains(line, " "+other+"=") {
						t.Errorf("line names the component under a second key %q: %s", other, line)
					}
				}
			}
		})
	}
}

// TestNotYetValidSeenFirstByReloadIsRecheckedToo: the refusal is found by an
// explicit Reload, not by the reloader's own loop (no event, no poll); the re-check
// at NotBefore still happens.
func TestNotYetValidSeenFirstByReloadIsRecheckedToo(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	now := time.Now()
	notBefore := now.Truncate(time.Second).Add(2 * time.Second)
	renewal := ca.MustIssue(hotcerttest.WithValidity(notBefore, now.Add(48*time.Hour)))
	h := startReloader(t, identity(ca.MustIssue()), hotcert.WithSettle(0)) // polling is off
	h.src.silent = true
	h.src.Set(identity(renewal), nil)
	if err := h.r.Reload(context.Background()); hotcert.ReasonOf(err) != hotcert.ReasonNotYetValid {
		t.Fatalf("Reload = %v, want not_yet_valid", err)
	}
	testutil.WaitFor(t, "the renewal to be served", func() bool { return serial(h.r.Current()) == renewal.Cert.SerialNumber.String() })
	if f := len(h.obs.Failures()); f != 1 {
		t.Fatalf("%d failures, want 1", f)
	}
}
