package app

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
)

// controller-runtime's manager, asked to stop with LeaderElectionReleaseOnCancel,
// releases its Lease and then hears client-go's OnStoppedLeading callback, which
// it cannot tell from a lost election: it logs this error line although nothing
// went wrong (or, when the line loses a race with the end of its stop sequence,
// nothing). A Lease lost while the manager runs still ends Run with an error
// (printed by the binary); only the line of a requested stop is dropped, and Run
// says itself, at info level, that the Lease is released. Likewise a request the
// stop cancels (client-go's Lease renewal in flight: "Error retrieving lease lock"
// err="context canceled") is the stop, not an error: once ctx is done such lines
// are logged at info level.
const (
	stopSequenceMsg   = "error received after stop sequence was engaged"
	leaderElectionErr = "leader election lost"
	releasedMsg       = "stopped leading: the leader election Lease is released, another replica can take it at once"
)

// cleanStopLogger returns logger, except that once ctx is done the manager's
// "leader election lost" error of its stop sequence is not logged, and errors
// that are the stop's cancellation are logged at info level.
func cleanStopLogger(ctx context.Context, logger logr.Logger) logr.Logger {
	if logger.GetSink() == nil {
		return logger
	}
	return logr.New(&cleanStopSink{LogSink: logger.GetSink(), ctx: ctx})
}

type cleanStopSink struct {
	logr.LogSink
	ctx context.Context
}

func (s *cleanStopSink) Error(err error, msg string, kv ...any) {
	if s.ctx.Err() != nil {
		switch {
		case msg == stopSequenceMsg && err != nil && err.Error() == leaderElectionErr:
			return
		case errors.Is(err, context.Canceled):
			if s.LogSink.Enabled(0) {
				s.LogSink.Info(0, msg, append(kv, "err", err.Error())...)
			}
			return
		}
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s *cleanStopSink) WithValues(kv ...any) logr.LogSink {
	return &cleanStopSink{LogSink: s.LogSink.WithValues(kv...), ctx: s.ctx}
}

func (s *cleanStopSink) WithName(name string) logr.LogSink {
	return &cleanStopSink{LogSink: s.LogSink.WithName(name), ctx: s.ctx}
}

func (s *cleanStopSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return &cleanStopSink{LogSink: cd.WithCallDepth(depth), ctx: s.ctx}
	}
	return s
}
