package file

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hotcert/hotcert"
)

// Source reads TLS material from files. Create it with [New].
type Source struct {
	certPath, keyPath, caPath, bundlePath string
	files                                 *Set // certPath, keyPath, caPath, bundlePath, in this order
}

var (
	_ hotcert.Source       = (*Source)(nil)
	_ hotcert.SourceLogger = (*Source)(nil)
	_ hotcert.SourceLogger = (*Set)(nil)
)

// SetDefaultLogger implements hotcert.SourceLogger: a Reloader hands the source
// its logger, which says when a watch is lost and which files are subPath mounts,
// unless [WithLogger] gave one.
func (s *Source) SetDefaultLogger(l *slog.Logger) { s.files.SetDefaultLogger(l) }

// New returns a file source. It needs an identity ([WithKeyPair] or
// [WithCredentialBundle]), a trust bundle ([WithCA]), or both. New does not
// read the files: hotcert.New does the first load and fails fast on a missing or
// invalid file.
func New(opts ...Option) (*Source, error) {
	c := sourceConfig{setConfig: defaultSetConfig()}
	for _, o := range opts {
		o.applySource(&c)
	}
	switch {
	case c.certPath != "" && c.keyPath == "":
		return nil, fmt.Errorf("file: WithKeyPair: certificate file %s is given without its key file (a certificate is served with its private key)", c.certPath)
	case c.certPath == "" && c.keyPath != "":
		return nil, fmt.Errorf("file: WithKeyPair: key file %s is given without its certificate file (a key is served with its certificate chain)", c.keyPath)
	case c.certPath != "" && c.bundlePath != "":
		return nil, errors.New("file: WithKeyPair and WithCredentialBundle both give the identity: give one of them")
	case c.certPath == "" && c.bundlePath == "" && c.caPath == "":
		return nil, errors.New("file: nothing to read: give WithKeyPair or WithCredentialBundle (the identity), WithCA (the CA bundle), or both")
	}
	set, err := newSet([]File{{Path: c.certPath}, {Path: c.keyPath}, {Path: c.caPath}, {Path: c.bundlePath}}, c.setConfig)
	if err != nil {
		return nil, err
	}
	return &Source{certPath: c.certPath, keyPath: c.keyPath, caPath: c.caPath, bundlePath: c.bundlePath, files: set}, nil
}

// Read implements [hotcert.Source]. Every file is read from one kubelet generation
// of its directory: a certificate, key and CA bundle of one Secret volume are always
// of one update, and a bundle in another volume (a ConfigMap's) is of one update of
// that volume.
func (s *Source) Read(context.Context) (hotcert.Content, error) {
	ins, err := s.files.Read()
	if err != nil {
		return hotcert.Content{}, err
	}
	c := hotcert.Content{Cert: ins[0], Key: ins[1], CA: ins[2], Source: s.String()}
	if s.bundlePath != "" {
		if c.Cert, c.Key, err = splitCredentialBundle(ins[3]); err != nil {
			return hotcert.Content{}, err
		}
	}
	return c, nil
}

// NeverUpdated returns the files that a Kubernetes subPath mount put in place:
// they never change until the container restarts (see [Set.NeverUpdated]).
func (s *Source) NeverUpdated() []string { return s.files.NeverUpdated() }

// Watch implements [hotcert.Source]; see [Set.Watch].
func (s *Source) Watch(ctx context.Context, changed func()) error { return s.files.Watch(ctx, changed) }

// String describes the files, e.g. "files cert=/tls/tls.crt key=/tls/tls.key ca=/ca/ca.crt".
func (s *Source) String() string {
	var b strings.Builder
	b.WriteString("files")
	if s.certPath != "" {
		fmt.Fprintf(&b, " cert=%s key=%s", s.certPath, s.keyPath)
	}
	if s.bundlePath != "" {
		fmt.Fprintf(&b, " credential-bundle=%s", s.bundlePath)
	}
	if s.caPath != "" {
		fmt.Fprintf(&b, " ca=%s", s.caPath)
	}
	return b.String()
}
