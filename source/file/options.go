package file

import (
	"log/slog"
	"time"
)

// DefaultRewatchInterval is how often a directory that could not be watched (it does
// not exist yet, or inotify failed) is tried again.
const DefaultRewatchInterval = time.Second

// Option configures a [Source] or a [Set]. [WithKeyPair] and [WithCA] say what a
// Source reads; the others configure the reading and watching of both.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set. The paths configure a Source; the rest is the
// mechanism a Set runs.
type config struct {
	certPath, keyPath, caPath string
	bundlePath                string // a credential bundle: key and chain in one file
	maxSize                   int64
	rewatch                   time.Duration
	logger                    *slog.Logger
	mountInfo                 string // the mount table read for subPath mounts (see subPathMounts)
}

// WithKeyPair reads the identity from a PEM certificate chain (leaf first) and its
// private key.
func WithKeyPair(certPath, keyPath string) Option {
	return optionFunc(func(c *config) { c.certPath, c.keyPath = certPath, keyPath })
}

// WithCredentialBundle reads the identity from one file holding a PEM private key
// and its certificate chain (leaf first), in either order: the credential bundle a
// Kubernetes podCertificate projected volume writes at its credentialBundlePath (the
// key, then the chain). It replaces [WithKeyPair]; for the volume's separate
// keyPath and certificateChainPath files use WithKeyPair(certificateChainPath,
// keyPath).
func WithCredentialBundle(path string) Option {
	return optionFunc(func(c *config) { c.bundlePath = path })
}

// WithCA reads the trust bundle (one or more PEM CA certificates) from path, which may
// live in another directory than the key pair (e.g. a ConfigMap volume).
func WithCA(path string) Option {
	return optionFunc(func(c *config) { c.caPath = path })
}

// WithMaxSize caps each file at n bytes (default hotcert.DefaultMaxInputSize).
func WithMaxSize(n int64) Option {
	return optionFunc(func(c *config) { c.maxSize = n })
}

// WithRewatchInterval sets how often unwatched directories are retried
// (default [DefaultRewatchInterval]).
func WithRewatchInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.rewatch = d
		}
	})
}

// WithLogger sets the logger for watch problems (default: discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// withMountInfo reads the mount table from path instead of /proc/self/mountinfo
// (tests give fixtures).
func withMountInfo(path string) Option {
	return optionFunc(func(c *config) { c.mountInfo = path })
}
