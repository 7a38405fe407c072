// Package jwtfile is a jwtkeys.Source that reads a key set from files, typically a
// Kubernetes Secret mounted as a volume, and watches them the way the kubelet
// updates such volumes.
//
// The conventional layout of the directory ([Dir]) is
//
//	/keys/signing.key   PEM private key that signs (ES256, RS256 or EdDSA)
//	/keys/verify.pem    optional: PEM public keys that verify only
//
// or, for shared secrets,
//
//	/keys/hs256.keys    HS256 secrets, one base64 secret per line: the first signs, all verify
//
// Reading and watching are package source/file's [file.Set], the mechanism under the
// TLS file source: every file is read from one kubelet "..data" generation, so a
// Secret update that replaces signing.key and verify.pem together is seen as one
// change; each file must be a regular file (symlinks are followed) of at most the
// size cap; the directories are watched, never the files, retried when they cannot
// be, and the KeySet's poll covers missed events. A missing verify.pem means "no
// extra keys"; a missing signing key is an error.
package jwtfile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/source/file"
)

// Layout says which files hold a key set. Exactly one of SigningKey and HMACSecrets
// is set.
type Layout struct {
	// SigningKey is the file holding the one PEM private key that signs.
	SigningKey string
	// VerificationKeys is a file of PEM public keys that verify only. It may be
	// missing (no extra keys), e.g. while a Secret has no such key. Optional.
	VerificationKeys string
	// HMACSecrets is the file of HS256 secrets (one base64 secret per line, the
	// first signs), instead of a signing key.
	HMACSecrets string
}

// Dir is the conventional asymmetric layout of dir: signing.key and, if it exists,
// verify.pem.
func Dir(dir string) Layout {
	return Layout{
		SigningKey:       filepath.Join(dir, jwtkeys.SigningKeyName),
		VerificationKeys: filepath.Join(dir, jwtkeys.VerificationKeysName),
	}
}

// Source reads a key set from files. Create it with [New].
type Source struct {
	layout Layout
	files  *file.Set // SigningKey, HMACSecrets, VerificationKeys, in this order
}

var (
	_ jwtkeys.Source       = (*Source)(nil)
	_ hotcert.SourceLogger = (*Source)(nil)
)

// SetDefaultLogger implements hotcert.SourceLogger: the KeySet running the source
// hands it its logger, which says when a watch is lost and which files are subPath
// mounts, unless [file.WithLogger] gave one.
func (s *Source) SetDefaultLogger(l *slog.Logger) { s.files.SetDefaultLogger(l) }

// New returns a file source for layout. opts are package source/file's options for
// reading and watching ([file.WithMaxSize], [file.WithRewatchInterval],
// [file.WithLogger]). New does not read the files: jwtkeys.New does the first load
// and fails fast on a missing or invalid file.
func New(layout Layout, opts ...file.SetOption) (*Source, error) {
	switch {
	case layout.SigningKey != "" && layout.HMACSecrets != "":
		return nil, errors.New("jwtfile: give a signing key or HMAC secrets, not both")
	case layout.SigningKey == "" && layout.HMACSecrets == "":
		return nil, errors.New("jwtfile: nothing signs: give a signing key (Dir, Layout.SigningKey) or HMAC secrets (Layout.HMACSecrets)")
	}
	set, err := file.NewSet([]file.File{
		{Path: layout.SigningKey},
		{Path: layout.HMACSecrets},
		{Path: layout.VerificationKeys, Optional: true},
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("jwtfile: %w", err)
	}
	return &Source{layout: layout, files: set}, nil
}

// String describes the files, e.g. "files signing=/keys/signing.key verify=/keys/verify.pem".
func (s *Source) String() string {
	var b strings.Builder
	b.WriteString("files")
	for _, p := range [...]struct{ name, path string }{{"signing", s.layout.SigningKey}, {"hmac", s.layout.HMACSecrets}, {"verify", s.layout.VerificationKeys}} {
		if p.path != "" {
			fmt.Fprintf(&b, " %s=%s", p.name, p.path)
		}
	}
	return b.String()
}

// Read implements jwtkeys.Source: every file is read from one kubelet generation of
// its directory.
func (s *Source) Read(context.Context) (jwtkeys.Content, error) {
	ins, err := s.files.Read()
	if err != nil {
		return jwtkeys.Content{}, err
	}
	return jwtkeys.Content{SigningKey: ins[0], HMACSecrets: ins[1], VerificationKeys: ins[2], Source: s.String()}, nil
}

// Watch implements jwtkeys.Source: see [file.Set.Watch].
func (s *Source) Watch(ctx context.Context, changed func()) error { return s.files.Watch(ctx, changed) }
