package drain_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/hotcerttest"
)

// handNotifier delivers the changes a test hands it, synchronously.
type handNotifier struct {
	mu sync.Mutex
	fn func(prev, next *hotcert.Material)
}

func (n *handNotifier) Subscribe(fn func(prev, next *hotcert.Material)) func() {
	n.mu.Lock()
	n.fn = fn
	n.mu.Unlock()
	return func() {}
}

func (n *handNotifier) change(prev, next *hotcert.Material) {
	n.mu.Lock()
	fn := n.fn
	n.mu.Unlock()
	fn(prev, next)
}

func mustValidate(t *testing.T, c hotcert.Content) *hotcert.Material {
	t.Helper()
	m, err := hotcert.Validate(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReconnectOnChangeFollowsTheCertificateOnly: a client reconnects when its own
// certificate changes (gained, replaced), never when only its CA bundle does — with
// or without a certificate of its own.
func TestReconnectOnChangeFollowsTheCertificateOnly(t *testing.T) {
	caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	l1, l2 := caA.MustIssue(), caA.MustIssue()
	trust := func(cas ...*hotcerttest.CA) hotcert.Input {
		return hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)}
	}
	withID := func(l *hotcerttest.Leaf, cas ...*hotcerttest.CA) *hotcert.Material {
		return mustValidate(t, hotcert.Content{Cert: hotcert.Input{Name: "tls.crt", Data: l.ChainPEM}, Key: hotcert.Input{Name: "tls.key", Data: l.KeyPEM}, CA: trust(cas...)})
	}
	trustOnlyA := mustValidate(t, hotcert.Content{CA: trust(caA)})
	trustOnlyAB := mustValidate(t, hotcert.Content{CA: trust(caA, caB)})

	n := &handNotifier{}
	calls := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() {
		close(started)
		drain.ReconnectOnChange(ctx, n, 0, func() { calls <- struct{}{} })
	}()
	<-started
	for {
		n.mu.Lock()
		ok := n.fn != nil
		n.mu.Unlock()
		if ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	expect := func(what string, reconnect bool) {
		t.Helper()
		if reconnect {
			select {
			case <-calls:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no reconnect", what)
			}
			return
		}
		select {
		case <-calls:
			t.Fatalf("%s: reconnected although the certificate did not change", what)
		case <-time.After(100 * time.Millisecond): // the window is 0: a reconnect would be immediate
		}
	}
	n.change(trustOnlyA, trustOnlyAB)
	expect("CA bundle changed, no certificate", false)
	idA := withID(l1, caA)
	n.change(trustOnlyAB, idA)
	expect("certificate gained", true)
	n.change(idA, withID(l1, caA, caB))
	expect("CA bundle changed, same certificate", false)
	n.change(idA, withID(l2, caA))
	expect("certificate replaced", true)
}
