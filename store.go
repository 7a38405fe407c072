package hotcert

import (
	"sync"
	"sync/atomic"
)

// Store publishes the current Material behind an atomic pointer.
type Store struct {
	cur atomic.Pointer[Material]

	mu   sync.Mutex
	subs map[*subscription]struct{}
}

var (
	_ Provider = (*Store)(nil)
	_ Notifier = (*Store)(nil)
)

// NewStore returns a Store holding m (which may be nil until the first Set).
func NewStore(m *Material) *Store {
	s := &Store{}
	if m != nil {
		s.cur.Store(m)
	}
	return s
}

// Current returns the Material in use, or nil if none was set.
func (s *Store) Current() *Material { return s.cur.Load() }

// Set publishes m and wakes every subscriber. It returns the previous Material.
func (s *Store) Set(m *Material) *Material {
	prev := s.cur.Swap(m)
	s.mu.Lock()
	for sub := range s.subs {
		sub.wake()
	}
	s.mu.Unlock()
	return prev
}

// Subscribe implements [Notifier].
func (s *Store) Subscribe(fn func(prev, next *Material)) func() {
	sub := &subscription{kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	last := s.cur.Load()
	if subscribeRaceHook != nil {
		subscribeRaceHook()
	}
	s.mu.Lock()
	if s.subs == nil {
		s.subs = make(map[*subscription]struct{})
	}
	s.subs[sub] = struct{}{}
	// A Set between reading last and registering woke every subscriber but this
	// one: look once more, now that any later Set is sure to wake it.
	if s.cur.Load() != last {
		sub.wake()
	}
	s.mu.Unlock()

	go func() {
		defer close(sub.stopped)
		for {
			select {
			case <-sub.done:
				return
			case <-sub.kick:
			}
			if next := s.cur.Load(); next != last {
				fn(last, next)
				last = next
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, sub)
			s.mu.Unlock()
			close(sub.done)
			<-sub.stopped
		})
	}
}

// subscribeRaceHook, when set by a test, runs inside Subscribe between reading the
// current Material and registering the subscription: the window a racing Set
// falls into.
var subscribeRaceHook func()

type subscription struct {
	kick    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// wake never blocks: a pending kick already covers this change.
func (s *subscription) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
