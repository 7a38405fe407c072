package file

import (
	"log/slog"
	"time"
)

// DefaultRewatchInterval is how often a directory that could not be watched (it does
// not exist yet, or inotify failed) is tried again.
const DefaultRewatchInterval = time.Second

// Option configures a [Source].
type Option interface{ apply(*Source) }

type optionFunc func(*Source)

func (f optionFunc) apply(s *Source) { f(s) }

// WithKeyPair reads the identity from a PEM certificate chain (leaf first) and its
// private key.
func WithKeyPair(certPath, keyPath string) Option {
	return optionFunc(func(s *Source) { s.certPath, s.keyPath = certPath, keyPath })
}

// WithCA reads the trust bundle (one or more PEM CA certificates) from path, which may
// live in another directory than the key pair (e.g. a ConfigMap volume).
func WithCA(path string) Option {
	return optionFunc(func(s *Source) { s.caPath = path })
}

// WithMaxSize caps each file at n bytes (default hotcert.DefaultMaxInputSize).
func WithMaxSize(n int64) Option {
	return optionFunc(func(s *Source) { s.maxSize = n })
}

// WithRewatchInterval sets how often unwatched directories are retried
// (default [DefaultRewatchInterval]).
func WithRewatchInterval(d time.Duration) Option {
	return optionFunc(func(s *Source) {
		if d > 0 {
			s.rewatch = d
		}
	})
}

// WithLogger sets the logger for watch problems (default: discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(s *Source) {
		if l != nil {
			s.logger = l
		}
	})
}
