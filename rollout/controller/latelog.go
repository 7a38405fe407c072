package controller

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// lateHandler is an slog.Handler whose destination is chosen after it is
// built (the webhook's certificate loads in New, the manager's logger is known
// in SetupWithManager): it discards until set is called.
type lateHandler struct {
	dst *atomic.Pointer[slog.Handler]
	// derive re-applies the WithAttrs and WithGroup calls made on this handler
	// to the destination.
	derive []func(slog.Handler) slog.Handler
}

func newLateHandler() *lateHandler {
	return &lateHandler{dst: new(atomic.Pointer[slog.Handler])}
}

// set sends every record from now on to h.
func (l *lateHandler) set(h slog.Handler) { l.dst.Store(&h) }

func (l *lateHandler) target() slog.Handler {
	p := l.dst.Load()
	if p == nil {
		return nil
	}
	h := *p
	for _, d := range l.derive {
		h = d(h)
	}
	return h
}

func (l *lateHandler) Enabled(ctx context.Context, level slog.Level) bool {
	h := l.target()
	return h != nil && h.Enabled(ctx, level)
}

func (l *lateHandler) Handle(ctx context.Context, r slog.Record) error {
	if h := l.target(); h != nil {
		return h.Handle(ctx, r)
	}
	return nil
}

func (l *lateHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return l.with(func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })
}

func (l *lateHandler) WithGroup(name string) slog.Handler {
	return l.with(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

func (l *lateHandler) with(d func(slog.Handler) slog.Handler) *lateHandler {
	return &lateHandler{dst: l.dst, derive: append(append([]func(slog.Handler) slog.Handler(nil), l.derive...), d)}
}
