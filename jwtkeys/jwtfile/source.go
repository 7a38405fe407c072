// Package jwtfile is a jwtkeys.Source that reads a key set from files, typically a
// Kubernetes Secret mounted as a volume, and watches them the way the kubelet
// updates such volumes.
//
// The conventional layout of the directory is
//
//	/keys/signing.key   PEM private key that signs (ES256, RS256 or EdDSA)
//	/keys/verify.pem    optional: PEM public keys that verify only
//
// or, for shared secrets,
//
//	/keys/hs256.keys    HS256 secrets, one base64 secret per line: the first signs, all verify
//
// The files of one directory are read from one kubelet "..data" generation, so a
// Secret update that replaces signing.key and verify.pem together is seen as one
// change. Each file must be a regular file (symlinks are followed) of at most the
// size cap. A missing verify.pem means "no extra keys"; a missing signing key is an
// error. Watching is package source/file's: the directories are watched, never the
// files, retried when they cannot be, and the KeySet's poll covers missed events.
package jwtfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/source/file"
)

// Source reads a key set from files. Create it with [New].
type Source struct {
	signingPath, verifyPath, hmacPath string
	maxSize                           int64
	rewatch                           time.Duration
	logger                            *slog.Logger
}

var _ jwtkeys.Source = (*Source)(nil)

// Option configures a [Source].
type Option interface{ apply(*Source) }

type optionFunc func(*Source)

func (f optionFunc) apply(s *Source) { f(s) }

// WithDir reads the conventional asymmetric layout of dir: signing.key and, if it
// exists, verify.pem.
func WithDir(dir string) Option {
	return optionFunc(func(s *Source) {
		s.signingPath = filepath.Join(dir, jwtkeys.SigningKeyName)
		s.verifyPath = filepath.Join(dir, jwtkeys.VerificationKeysName)
	})
}

// WithSigningKey reads the signing key (one PEM private key) from path.
func WithSigningKey(path string) Option { return optionFunc(func(s *Source) { s.signingPath = path }) }

// WithVerificationKeys reads verification-only PEM public keys from path. The file
// may be missing (no extra keys), e.g. while a Secret has no such key.
func WithVerificationKeys(path string) Option {
	return optionFunc(func(s *Source) { s.verifyPath = path })
}

// WithHMACSecrets reads the HS256 secret list from path (one base64 secret per line,
// the first signs). It replaces a signing key.
func WithHMACSecrets(path string) Option { return optionFunc(func(s *Source) { s.hmacPath = path }) }

// WithMaxSize caps each file at n bytes (default hotcert.DefaultMaxInputSize).
func WithMaxSize(n int64) Option { return optionFunc(func(s *Source) { s.maxSize = n }) }

// WithRewatchInterval sets how often unwatched directories are retried (default
// file.DefaultRewatchInterval).
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

// New returns a file source. It needs a signing key ([WithDir] or [WithSigningKey])
// or HMAC secrets ([WithHMACSecrets]), not both. New does not read the files:
// jwtkeys.New does the first load and fails fast on a missing or invalid file.
func New(opts ...Option) (*Source, error) {
	s := &Source{
		maxSize: hotcert.DefaultMaxInputSize,
		rewatch: file.DefaultRewatchInterval,
		logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o.apply(s)
	}
	switch {
	case s.signingPath != "" && s.hmacPath != "":
		return nil, errors.New("jwtfile: give a signing key or HMAC secrets, not both")
	case s.signingPath == "" && s.hmacPath == "":
		return nil, errors.New("jwtfile: nothing signs: give a signing key (WithDir, WithSigningKey) or HMAC secrets (WithHMACSecrets)")
	case s.maxSize <= 0:
		return nil, fmt.Errorf("jwtfile: size cap must be positive, got %d", s.maxSize)
	}
	return s, nil
}

// String describes the files, e.g. "files signing=/keys/signing.key verify=/keys/verify.pem".
func (s *Source) String() string {
	var b strings.Builder
	b.WriteString("files")
	for _, p := range [...]struct{ name, path string }{{"signing", s.signingPath}, {"hmac", s.hmacPath}, {"verify", s.verifyPath}} {
		if p.path != "" {
			fmt.Fprintf(&b, " %s=%s", p.name, p.path)
		}
	}
	return b.String()
}

// Read implements jwtkeys.Source: every file is read from one kubelet generation of
// its directory.
func (s *Source) Read(context.Context) (jwtkeys.Content, error) {
	paths := s.paths()
	var (
		ins []hotcert.Input
		err error
	)
	for range maxGenerationRetries {
		before := file.Generations(paths)
		ins, err = s.readAll(paths)
		if slices.Equal(before, file.Generations(paths)) {
			break
		}
	}
	if err != nil {
		return jwtkeys.Content{}, err
	}
	return jwtkeys.Content{SigningKey: ins[0], HMACSecrets: ins[1], VerificationKeys: ins[2], Source: s.String()}, nil
}

// Watch implements jwtkeys.Source with package source/file's directory watch, one per
// directory holding a configured file: the kubelet's symlink swap names no file and
// kills file watches, so directories are watched, and every event in them may be a
// change. (A file.Source configured with one path of a directory watches exactly that
// directory; its Read is never used here.)
func (s *Source) Watch(ctx context.Context, changed func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, p := range s.dirPaths() {
		w, err := file.New(file.WithCA(p), file.WithLogger(s.logger), file.WithRewatchInterval(s.rewatch))
		if err != nil {
			return fmt.Errorf("jwtfile: %w", err)
		}
		wg.Go(func() {
			if err := w.Watch(ctx, changed); err != nil && ctx.Err() == nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return fmt.Errorf("jwtfile: %w", first)
	}
	return nil
}

// paths returns signing, hmac and verify paths in Content order ("" when not configured).
func (s *Source) paths() []string { return []string{s.signingPath, s.hmacPath, s.verifyPath} }

// dirPaths returns one configured path per distinct directory.
func (s *Source) dirPaths() []string {
	var dirs, out []string
	for _, p := range s.paths() {
		if p == "" {
			continue
		}
		if d := filepath.Clean(filepath.Dir(p)); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
			out = append(out, p)
		}
	}
	return out
}

// maxGenerationRetries bounds how often a read is repeated because "..data" moved
// while the files were being read.
const maxGenerationRetries = 5

func (s *Source) readAll(paths []string) ([]hotcert.Input, error) {
	ins := make([]hotcert.Input, len(paths))
	for i, p := range paths {
		if p == "" {
			continue
		}
		data, err := file.ReadFile(p, s.maxSize)
		if err != nil {
			var he *hotcert.Error
			if p == s.verifyPath && errors.As(err, &he) && he.Reason == hotcert.ReasonMissing {
				continue // no verify.pem: no extra keys
			}
			return nil, err
		}
		ins[i] = hotcert.Input{Name: p, Data: data}
	}
	return ins, nil
}
