package revocation_test

import (
	"context"
	"crypto/x509"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/revocation"
)

type countingObserver struct {
	mu                     sync.Mutex
	loads, failures, stale int
}

func (o *countingObserver) ObserveLoad(string, *revocation.List, bool) {
	o.mu.Lock()
	o.loads++
	o.mu.Unlock()
}
func (o *countingObserver) ObserveFailure(string, error) { o.mu.Lock(); o.failures++; o.mu.Unlock() }
func (o *countingObserver) ObserveStale(string, revocation.CRLInfo) {
	o.mu.Lock()
	o.stale++
	o.mu.Unlock()
}
func (o *countingObserver) counts() (int, int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.loads, o.failures, o.stale
}

// TestReloaderKeepsLastGood follows a mounted-Secret-like directory: a revocation
// is published; a forged CRL, a stale CRL and a garbage list are each refused
// once (one log line, one count) while the last good list stays.
func TestReloaderKeepsLastGood(t *testing.T) {
	now := time.Now()
	ca := hotcerttest.MustNewCA(hotcerttest.WithCommonName("fleet CA"))
	a, b := ca.MustIssue(), ca.MustIssue()
	trust := hotcert.NewStore(trustOf(t, ca))
	w := hotcerttest.MustNewAtomicWriter(t.TempDir())
	crl1 := ca.MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour))
	w.MustWrite(map[string][]byte{"deny.list": []byte("# none\n"), "ca.crl": crl1})
	src, err := revocation.Files(filepath.Join(w.Dir(), "deny.list"), filepath.Join(w.Dir(), "ca.crl"))
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	obs := &countingObserver{}
	r, err := revocation.New(context.Background(), src, trust, hotcert.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		hotcert.WithSettle(0), hotcert.WithPollInterval(0), revocation.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	chainA := []*x509.Certificate{a.Cert, ca.Cert}
	if r.Current().Check(chainA) != nil {
		t.Fatal("a refused before any revocation")
	}
	w.MustWrite(map[string][]byte{"deny.list": []byte("# none\n"),
		"ca.crl": ca.MustCRL(2, now.Add(-time.Hour), now.Add(time.Hour), a.Cert.SerialNumber)})
	testutil.WaitFor(t, "the CRL revoking a", func() bool { return r.Current().Check(chainA) != nil })
	good := r.Current()

	forger := hotcerttest.MustNewCA(hotcerttest.WithCommonName("fleet CA"))
	for i, bad := range []map[string][]byte{
		{"deny.list": []byte("# none\n"), "ca.crl": forger.MustCRL(3, now.Add(-time.Hour), now.Add(time.Hour), b.Cert.SerialNumber)},
		{"deny.list": []byte("# none\n"), "ca.crl": ca.MustCRL(4, now.Add(-2*time.Hour), now.Add(-time.Hour), b.Cert.SerialNumber)},
		{"deny.list": []byte("serial ZZ issuer nothing\n"), "ca.crl": crl1},
	} {
		w.MustWrite(bad)
		testutil.WaitFor(t, "the refusal", func() bool { _, f, _ := obs.counts(); return f == i+1 })
		if r.Current() != good {
			t.Fatalf("bad content %d replaced the last good list", i)
		}
		_ = r.Reload(context.Background()) // a re-read of the same bad content is not a new failure
	}
	if _, f, _ := obs.counts(); f != 3 || logs.Count("deny list reload failed") != 3 {
		t.Errorf("failures counted %d, logged %d; want 3 each\n%s", f, logs.Count("deny list reload failed"), logs.String())
	}
	if r.Current().Check([]*x509.Certificate{b.Cert, ca.Cert}) != nil {
		t.Error("b refused: a bad CRL was applied")
	}
}

// TestStaleCRLPolicy moves a fake clock past the NextUpdate of the CRL in use:
// it is reported once; KeepEnforcing keeps refusing the revoked certificate and
// admits the others, RefuseAll refuses every peer of the issuer and tells
// subscribers.
func TestStaleCRLPolicy(t *testing.T) {
	for _, policy := range []revocation.StalePolicy{revocation.KeepEnforcing, revocation.RefuseAll} {
		t.Run(policy.String(), func(t *testing.T) {
			clock := hotcerttest.NewFakeClock(time.Now())
			ca := hotcerttest.MustNewCA()
			revoked, other := ca.MustIssue(), ca.MustIssue()
			w := hotcerttest.MustNewAtomicWriter(t.TempDir())
			w.MustWrite(map[string][]byte{"ca.crl": ca.MustCRL(1, clock.Now().Add(-time.Hour), clock.Now().Add(time.Hour), revoked.Cert.SerialNumber)})
			src, err := revocation.Files("", filepath.Join(w.Dir(), "ca.crl"))
			if err != nil {
				t.Fatal(err)
			}
			obs := &countingObserver{}
			r, err := revocation.New(context.Background(), src, hotcert.NewStore(trustOf(t, ca)),
				revocation.WithClock(clock), revocation.WithStalePolicy(policy), revocation.WithObserver(obs), hotcert.WithPollInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			changed := make(chan *revocation.List, 4)
			defer r.Subscribe(func(_, next *revocation.List) { changed <- next })()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = r.Start(ctx) }()
			defer func() { cancel(); <-done }()

			testutil.WaitFor(t, "the staleness timer", func() bool { return clock.Waiting() > 0 })
			clock.Advance(2 * time.Hour)
			testutil.WaitFor(t, "the stale report", func() bool { _, _, s := obs.counts(); return s == 1 })
			if len(r.Current().Info().Stale) != 1 {
				t.Errorf("Info.Stale = %v", r.Current().Info().Stale)
			}
			if r.Current().Check([]*x509.Certificate{revoked.Cert, ca.Cert}) == nil {
				t.Error("the revoked certificate is admitted once its CRL is stale")
			}
			otherErr := r.Current().Check([]*x509.Certificate{other.Cert, ca.Cert})
			if policy == revocation.KeepEnforcing && otherErr != nil {
				t.Errorf("keep-enforcing refused another peer: %v", otherErr)
			}
			if policy == revocation.RefuseAll {
				if otherErr == nil {
					t.Error("refuse-all admitted a peer of the stale CRL's issuer")
				}
				select {
				case <-changed:
				case <-time.After(10 * time.Second):
					t.Error("refuse-all did not tell subscribers")
				}
			}
		})
	}
}
