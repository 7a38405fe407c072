package drain

import "time"

// ExpiryPending returns the expiry drains s has planned and not yet reached.
func (s *Server) ExpiryPending() []time.Time { return s.expiry.pending() }
