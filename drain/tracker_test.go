package drain_test

import (
	"crypto/x509"
	"net"
	"sync"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// A Tracker hands the connections the policies pick to its drain function, once
// each: those tracked under a previous certificate on an identity change (not one
// tracked after it, not on a trust-only change), and at once, prompt, those whose
// peer the new bundle no longer trusts. Done connections and a closed Tracker are
// left alone.
func TestTrackerPicksWhatThePoliciesSay(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, newCA.MustIssue(), newCA))
	trust := hotcert.NewStore(material(t, newCA.MustIssue(), oldCA, newCA))
	var mu sync.Mutex
	drained := map[net.Conn]bool{} // conn → prompt
	calls := 0
	tr := drain.NewTracker(func(c *drain.Tracked, prompt bool) {
		mu.Lock()
		defer mu.Unlock()
		drained[c.Conn()] = prompt
		calls++
	}, drain.WithIdentityDrain(id, 0), drain.WithTrustCut(trust))
	conn := func() net.Conn { a, b := net.Pipe(); t.Cleanup(func() { a.Close(); b.Close() }); return a }
	seen := func(c net.Conn) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		p, ok := drained[c]
		return ok, p
	}

	oldPeer, newPeer, gone := conn(), conn(), conn()
	tOld, tNew, tGone := tr.Track(oldPeer), tr.Track(newPeer), tr.Track(gone)
	tOld.SetPeer([]*x509.Certificate{oldCA.MustIssue().Cert})
	tNew.SetPeer([]*x509.Certificate{newCA.MustIssue().Cert})
	tGone.Done()
	if n := tr.Conns(); n != 2 {
		t.Fatalf("Conns() = %d, want 2", n)
	}

	trust.Set(material(t, newCA.MustIssue(), newCA))
	testutil.WaitFor(t, "the untrusted peer cut", func() bool { ok, _ := seen(oldPeer); return ok })
	if _, prompt := seen(oldPeer); !prompt {
		t.Error("a trust cut was not prompt")
	}

	id.Set(material(t, newCA.MustIssue(), newCA))
	after := conn()
	tr.Track(after) // under the new certificate
	testutil.WaitFor(t, "the identity drain", func() bool { ok, _ := seen(newPeer); return ok })
	if _, prompt := seen(newPeer); prompt {
		t.Error("an identity drain was prompt")
	}
	if ok, _ := seen(after); ok {
		t.Error("a connection tracked under the new certificate was drained")
	}
	if ok, _ := seen(gone); ok {
		t.Error("a connection marked Done was drained")
	}

	tr.Close()
	id.Set(material(t, newCA.MustIssue(), newCA))
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("%d drain calls, want 2 (one per connection; none after Close)", calls)
	}
}

// WithServedBy limits the identity drain to the connections its function names
// (those served this policy set's identity); the trust cut still covers all.
func TestTrackerServedByLimitsTheIdentityDrain(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue(), ca))
	trust := hotcert.NewStore(material(t, ca.MustIssue(), ca))
	mine, other := net.Pipe()
	t.Cleanup(func() { mine.Close(); other.Close() })
	var mu sync.Mutex
	drained := map[net.Conn]bool{}
	tr := drain.NewTracker(func(c *drain.Tracked, prompt bool) {
		mu.Lock()
		defer mu.Unlock()
		drained[c.Conn()] = prompt
	}, drain.WithIdentityDrain(id, 0), drain.WithTrustCut(trust), drain.WithServedBy(func(c net.Conn) bool { return c == mine }))
	defer tr.Close()
	tr.Track(mine)
	tOther := tr.Track(other)
	tOther.SetPeer([]*x509.Certificate{hotcerttest.MustNewCA().MustIssue().Cert})
	id.Set(material(t, ca.MustIssue(), ca))
	testutil.WaitFor(t, "the identity drain of the connection served the identity", func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := drained[mine]
		return ok
	})
	mu.Lock()
	_, otherDrained := drained[other]
	mu.Unlock()
	if otherDrained {
		t.Fatal("the identity drain took a connection served another identity")
	}
	trust.Set(material(t, ca.MustIssue(), ca, hotcerttest.MustNewCA())) // other's peer is still untrusted
	testutil.WaitFor(t, "the trust cut of the other connection", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return drained[other]
	})
}
