package demo

import (
	"bytes"
	"io"
	"sync"
)

// logSink writes the servers' and agents' log lines to a file and counts lines by
// message, so invariants can check "one log line per failure".
type logSink struct {
	mu     sync.Mutex
	w      io.Writer
	counts map[string]int
}

func newLogSink(w io.Writer) *logSink { return &logSink{w: w, counts: map[string]int{}} }

// Write implements io.Writer; slog's text handler writes one line per call.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := bytes.Index(p, []byte(`msg="`)); i >= 0 {
		rest := p[i+5:]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			s.counts[string(rest[:j])]++
		}
	}
	return s.w.Write(p)
}

// count returns how many lines carried msg.
func (s *logSink) count(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[msg]
}
