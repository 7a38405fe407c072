package file

import (
	"log/slog"
	"time"
)

// DefaultRewatchInterval is how often a directory that could not be watched (it does
// not exist yet, or inotify failed) is tried again.
const DefaultRewatchInterval = time.Second

// Option configures a [Source]. [WithKeyPair], [WithCredentialBundle] and [WithCA]
// say what it reads; every [SetOption] (how files are read and watched) is an
// Option too.
type Option interface{ applySource(*sourceConfig) }

// SetOption configures how files are read and watched, for a [Set] and for a
// [Source]: [WithMaxSize], [WithRewatchInterval], [WithLogger]. What a Source
// reads is not a SetOption, so the compiler refuses it for [NewSet].
type SetOption interface {
	Option
	applySet(*setConfig)
}

// sourceOption says what a Source reads.
type sourceOption func(*sourceConfig)

func (f sourceOption) applySource(c *sourceConfig) { f(c) }

// setOption configures the reading and watching of a Set, and of a Source's Set.
type setOption func(*setConfig)

func (f setOption) applySet(c *setConfig) { f(c) }

func (f setOption) applySource(c *sourceConfig) { f(&c.setConfig) }

// sourceConfig is what a Source reads, and the Set it reads it with.
type sourceConfig struct {
	certPath, keyPath, caPath string
	bundlePath                string // a credential bundle: key and chain in one file
	setConfig
}

// setConfig is the mechanism a Set runs.
type setConfig struct {
	maxSize   int64
	rewatch   time.Duration
	logger    *slog.Logger
	mountInfo string // the mount table read for subPath mounts (see subPathMounts)
}

// WithKeyPair reads the identity from a PEM certificate chain (leaf first) and its
// private key.
func WithKeyPair(certPath, keyPath string) Option {
	return sourceOption(func(c *sourceConfig) { c.certPath, c.keyPath = certPath, keyPath })
}

// WithCredentialBundle reads the identity from one file holding a PEM private key
// and its certificate chain (leaf first), in either order: the credential bundle a
// Kubernetes podCertificate projected volume writes at its credentialBundlePath (the
// key, then the chain). It replaces [WithKeyPair]; for the volume's separate
// keyPath and certificateChainPath files use WithKeyPair(certificateChainPath,
// keyPath).
func WithCredentialBundle(path string) Option {
	return sourceOption(func(c *sourceConfig) { c.bundlePath = path })
}

// WithCA reads the trust bundle (one or more PEM CA certificates) from path, which may
// live in another directory than the key pair (e.g. a ConfigMap volume).
func WithCA(path string) Option {
	return sourceOption(func(c *sourceConfig) { c.caPath = path })
}

// WithMaxSize caps each file at n bytes (default hotcert.DefaultMaxInputSize).
func WithMaxSize(n int64) SetOption {
	return setOption(func(c *setConfig) { c.maxSize = n })
}

// WithRewatchInterval sets how often unwatched directories are retried
// (default [DefaultRewatchInterval]).
func WithRewatchInterval(d time.Duration) SetOption {
	return setOption(func(c *setConfig) {
		if d > 0 {
			c.rewatch = d
		}
	})
}

// WithLogger sets the logger for watch problems and subPath mounts (default: the
// logger of the Reloader that runs the source, see hotcert.SourceLogger; with no
// Reloader, discard).
func WithLogger(l *slog.Logger) SetOption {
	return setOption(func(c *setConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

// withMountInfo reads the mount table from path instead of /proc/self/mountinfo
// (tests give fixtures).
func withMountInfo(path string) SetOption {
	return setOption(func(c *setConfig) { c.mountInfo = path })
}
