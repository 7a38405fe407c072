package mirror

// WithRetry sets how long a failed write waits before it is tried again.
var WithRetry = withRetry

// Tries returns how many updates m attempted.
func Tries(m *Mirror) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tries
}
