package jwtkeys

import (
	"context"
	"sync"
)

// MemorySource is a [Source] held in memory: a program that gets its keys from
// elsewhere (a vault, a flag, a test) sets them, and a running KeySet follows.
type MemorySource struct {
	mu       sync.Mutex
	c        Content
	watchers map[*func()]struct{}
}

var _ Source = (*MemorySource)(nil)

// NewMemorySource returns a source holding c.
func NewMemorySource(c Content) *MemorySource {
	return &MemorySource{c: c, watchers: map[*func()]struct{}{}}
}

// Set replaces the content and notifies watchers.
func (m *MemorySource) Set(c Content) {
	m.mu.Lock()
	m.c = c
	fns := make([]func(), 0, len(m.watchers))
	for fn := range m.watchers {
		fns = append(fns, *fn)
	}
	m.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Read implements [Source].
func (m *MemorySource) Read(context.Context) (Content, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.c
	if c.Source == "" {
		c.Source = m.String()
	}
	return c, nil
}

// Watch implements [Source]: changed is called once when the watch starts and after
// every Set.
func (m *MemorySource) Watch(ctx context.Context, changed func()) error {
	fn := &changed
	m.mu.Lock()
	m.watchers[fn] = struct{}{}
	m.mu.Unlock()
	changed() // a Set may have happened before the watch was up
	<-ctx.Done()
	m.mu.Lock()
	delete(m.watchers, fn)
	m.mu.Unlock()
	return nil
}

// String implements [Source].
func (m *MemorySource) String() string { return "memory" }
