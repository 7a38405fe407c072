package hotcert

import (
	"testing"
	"time"

	"github.com/hotcert/hotcert/hotcerttest"
)

// TestSubscribeSeesASetThatRacesIt: a Set that lands while Subscribe registers (after
// Subscribe read the current Material, before it joined the subscribers) still
// reaches the new subscriber.
func TestSubscribeSeesASetThatRacesIt(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	mats := make([]*Material, 2)
	for i := range mats {
		l := ca.MustIssue()
		m, err := Validate(Content{Cert: Input{Name: "tls.crt", Data: l.ChainPEM}, Key: Input{Name: "tls.key", Data: l.KeyPEM}})
		if err != nil {
			t.Fatal(err)
		}
		mats[i] = m
	}
	s := NewStore(mats[0])
	subscribeRaceHook = func() { s.Set(mats[1]) }
	defer func() { subscribeRaceHook = nil }()
	seen := make(chan *Material, 1)
	unsub := s.Subscribe(func(prev, next *Material) {
		if prev == mats[0] {
			seen <- next
		}
	})
	defer unsub()
	select {
	case next := <-seen:
		if next != mats[1] {
			t.Fatal("the subscriber saw another Material")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber never heard of the Set that raced its subscription")
	}
}
