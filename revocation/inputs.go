package revocation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/source/file"
)

// Inputs reads raw inputs and watches them: source/kube's Keys (chosen keys of a
// Secret or ConfigMap) has this shape, so a deny list kept in Kubernetes needs no
// code of its own.
type Inputs interface {
	Read(ctx context.Context) ([]hotcert.Input, error)
	Watch(ctx context.Context, changed func()) error
	String() string
}

// FromInputs returns a Source whose deny list is the first input of in and whose
// CRLs are the second, e.g.
//
//	revocation.FromInputs(kube.NewConfigMapKeys(client, ns, "revoked", []kube.Key{
//		{Name: "deny.list", Optional: true}, {Name: "ca.crl", Optional: true}}))
func FromInputs(in Inputs) Source { return inputsSource{in} }

type inputsSource struct{ in Inputs }

func (s inputsSource) Read(ctx context.Context) (Content, error) {
	ins, err := s.in.Read(ctx)
	if err != nil {
		return Content{}, err
	}
	var c Content
	if len(ins) > 0 {
		c.DenyList = ins[0]
	}
	if len(ins) > 1 {
		c.CRLs = ins[1]
	}
	c.Source = s.in.String()
	return c, nil
}

func (s inputsSource) Watch(ctx context.Context, changed func()) error {
	return s.in.Watch(ctx, changed)
}

func (s inputsSource) String() string { return s.in.String() }

// SetDefaultLogger implements hotcert.SourceLogger: an Inputs that logs by
// itself (a lost watch, a subPath mount) logs with the Reloader's logger.
func (s inputsSource) SetDefaultLogger(l *slog.Logger) {
	if sl, ok := s.in.(hotcert.SourceLogger); ok {
		sl.SetDefaultLogger(l)
	}
}

// Files returns a Source reading a deny-list file and a CRL file (either may be
// empty, not both) with package source/file's mechanism: both from one kubelet
// "..data" generation, the directories watched, the size capped (opts).
func Files(denyList, crls string, opts ...file.SetOption) (Source, error) {
	if denyList == "" && crls == "" {
		return nil, errors.New("revocation: give a deny-list file, a CRL file, or both")
	}
	set, err := file.NewSet([]file.File{{Path: denyList}, {Path: crls}}, opts...)
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	return FromInputs(fileInputs{set}), nil
}

type fileInputs struct{ *file.Set }

func (f fileInputs) Read(context.Context) ([]hotcert.Input, error) { return f.Set.Read() }
