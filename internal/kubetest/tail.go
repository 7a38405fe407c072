package kubetest

import (
	"fmt"
	"sync"
)

// tailBuffer is an io.Writer that keeps the last max bytes written to it, for
// showing a process's output when a test fails without keeping all of it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func newTailBuffer(max int) *tailBuffer {
	return &tailBuffer{max: max}
}

// Write implements io.Writer; it never fails.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	// Trim only once twice the limit is reached, to keep writes amortised O(1).
	if len(b.buf) > 2*b.max {
		cut := len(b.buf) - b.max
		b.dropped += int64(cut)
		b.buf = append(make([]byte, 0, 2*b.max), b.buf[cut:]...)
	}
	return len(p), nil
}

// String returns the kept output, noting how much was dropped before it.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	data := b.buf
	dropped := b.dropped
	if len(data) > b.max {
		dropped += int64(len(data) - b.max)
		data = data[len(data)-b.max:]
	}
	if dropped > 0 {
		return fmt.Sprintf("[... %d bytes dropped ...]\n%s", dropped, data)
	}
	return string(data)
}

// Len returns how many bytes are kept.
func (b *tailBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return min(len(b.buf), b.max)
}
