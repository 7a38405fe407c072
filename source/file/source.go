package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/hotcert/hotcert"
)

// Source reads TLS material from files. Create it with [New].
type Source struct {
	certPath, keyPath, caPath string
	maxSize                   int64
	rewatch                   time.Duration
	logger                    *slog.Logger
}

var _ hotcert.Source = (*Source)(nil)

// New returns a file source. It needs [WithKeyPair], [WithCA], or both. New does not
// read the files: hotcert.New does the first load and fails fast on a missing or
// invalid file.
func New(opts ...Option) (*Source, error) {
	s := &Source{
		maxSize: hotcert.DefaultMaxInputSize,
		rewatch: DefaultRewatchInterval,
		logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o.apply(s)
	}
	switch {
	case (s.certPath == "") != (s.keyPath == ""):
		return nil, errors.New("file: a certificate needs its key and a key its certificate")
	case s.certPath == "" && s.caPath == "":
		return nil, errors.New("file: nothing to read: give a key pair, a CA bundle, or both")
	case s.maxSize <= 0:
		return nil, fmt.Errorf("file: size cap must be positive, got %d", s.maxSize)
	}
	return s, nil
}

// Read implements [hotcert.Source]. The certificate and key are read from one kubelet
// generation; the CA bundle, which may live in another volume, from its own.
func (s *Source) Read(context.Context) (hotcert.Content, error) {
	c := hotcert.Content{Source: s.String()}
	if s.certPath != "" {
		ins, err := s.readGeneration(s.certPath, s.keyPath)
		if err != nil {
			return hotcert.Content{}, err
		}
		c.Cert, c.Key = ins[0], ins[1]
	}
	if s.caPath != "" {
		ins, err := s.readGeneration(s.caPath)
		if err != nil {
			return hotcert.Content{}, err
		}
		c.CA = ins[0]
	}
	return c, nil
}

// String describes the files, e.g. "files cert=/tls/tls.crt key=/tls/tls.key ca=/ca/ca.crt".
func (s *Source) String() string {
	var b strings.Builder
	b.WriteString("files")
	if s.certPath != "" {
		fmt.Fprintf(&b, " cert=%s key=%s", s.certPath, s.keyPath)
	}
	if s.caPath != "" {
		fmt.Fprintf(&b, " ca=%s", s.caPath)
	}
	return b.String()
}

// paths returns the configured file paths.
func (s *Source) paths() []string {
	var ps []string
	for _, p := range []string{s.certPath, s.keyPath, s.caPath} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}
