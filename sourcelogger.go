package hotcert

import (
	"log/slog"

	"github.com/hotcert/hotcert/reload"
)

// handLogger gives src the logger of a reloader configured with s, with its
// component and log attributes, if src logs by itself (see [SourceLogger]).
func handLogger(src any, s *reload.Settings) {
	if l, ok := src.(SourceLogger); ok {
		l.SetDefaultLogger(s.Logger.With(s.Attrs()...))
	}
}

// SetDefaultLogger implements [SourceLogger] for the sides that do.
func (c *composite) SetDefaultLogger(l *slog.Logger) {
	for _, s := range []Source{c.identity, c.trust} {
		if sl, ok := s.(SourceLogger); ok {
			sl.SetDefaultLogger(l)
		}
	}
}
