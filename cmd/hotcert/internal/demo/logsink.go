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

// Write implements io.Writer; slog's handlers write one line per call.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg, ok := message(p); ok {
		s.counts[msg]++
	}
	return s.w.Write(p)
}

// count returns how many lines carried msg.
func (s *logSink) count(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[msg]
}

// message returns the message of one log line of slog's text (msg="…") or JSON
// ("msg":"…") handler. Messages hold no quotes.
func message(line []byte) (string, bool) {
	for _, key := range [][]byte{[]byte(`msg="`), []byte(`"msg":"`)} {
		if i := bytes.Index(line, key); i >= 0 {
			rest := line[i+len(key):]
			if j := bytes.IndexByte(rest, '"'); j >= 0 {
				return string(rest[:j]), true
			}
		}
	}
	return "", false
}
