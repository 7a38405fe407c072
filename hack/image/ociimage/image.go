// Package ociimage builds the OCI images of hotcert's binaries without a
// container engine or a registry: one static binary alone on an empty base,
// as the non-root user 65532, with fixed timestamps, and the multi-platform
// index over such images that a release publishes. Its layer, config and
// labels are defined here and nowhere else.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the numeric user and group the image runs as (distroless's
// "nonroot"); the manifests run the pod as the same user.
const User = "65532:65532"

// epoch is every timestamp in the image (file times, creation time): a fixed
// one, so that the digest depends on the contents only.
var epoch = time.Unix(0, 0).UTC()

// Spec describes an image to build: the binary's module or workspace
// directory, package and version, the image's repository, and the
// architecture (default: this machine's).
type Spec struct {
	Dir, Package, Version, Repository, GOARCH string
}

// Image is a built image and what describes it.
type Image struct {
	v1.Image
	Ref      name.Tag
	Platform v1.Platform
	// Digest is the OCI manifest's (what a registry and the OCI layout
	// name); ID is the config's, the image ID that docker and containerd
	// show, which a tarball keeps (it carries no manifest of its own).
	Digest, ID     v1.Hash
	CompressedSize int64 // of the one layer
	BinarySize     int64
}

// Build compiles s's binary for linux/s.GOARCH (default: this machine's) and
// returns its image (see [FromBinary]).
func Build(s Spec) (*Image, error) {
	arch := s.GOARCH
	if arch == "" {
		arch = runtime.GOARCH
	}
	b := Binary{Dir: s.Dir, Package: s.Package, Version: s.Version, GOOS: "linux", GOARCH: arch}
	tmp, err := os.MkdirTemp("", "hotcert-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	binPath := filepath.Join(tmp, b.Name())
	if err := Compile(b, binPath); err != nil {
		return nil, err
	}
	content, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	return FromBinary(b, content, s.Repository)
}

// FromBinary returns the image of b, a linux binary already compiled (its
// bytes: content), tagged repository:b.Version: one layer holding only the
// binary at /<name>, on an empty base (no shell, no libc, no package
// manager), OCI media types, entrypoint the binary, user 65532.
func FromBinary(b Binary, content []byte, repository string) (*Image, error) {
	if b.GOOS != "linux" {
		return nil, fmt.Errorf("ociimage: an image of a %s binary: want linux", b.GOOS)
	}
	ref, err := name.NewTag(repository + ":" + b.Version)
	if err != nil {
		return nil, fmt.Errorf("ociimage: image reference: %w", err)
	}
	bin, arch := b.Name(), b.GOARCH
	layerTar, err := singleFileTar(bin, content)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching) // gzip once, not once per write
	if err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/image: " + b.Package, Comment: "static binary " + bin},
	})
	if err != nil {
		return nil, fmt.Errorf("ociimage: appending the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + bin},
		User:       User,
		WorkingDir: "/",
		Labels:     Labels(bin, b.Version),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("ociimage: image config: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	size, err := layer.Size()
	if err != nil {
		return nil, err
	}
	return &Image{Image: img, Ref: ref, Platform: v1.Platform{OS: "linux", Architecture: arch},
		Digest: digest, ID: id, CompressedSize: size, BinarySize: int64(len(content))}, nil
}

// Labels are the image's OCI annotations-as-labels.
func Labels(bin, version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       bin,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.source":      "https://github.com/hotcert/hotcert",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.description": "hotcert rollout controller: rolls workloads that cannot hot-reload when the Secrets and ConfigMaps they consume change",
	}
}

// singleFileTar is a tar stream holding one executable file, owned by root
// (the process runs as 65532 and only reads it), with the fixed timestamp.
func singleFileTar(name string, content []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(content)),
		ModTime: epoch, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTarball writes the image, tagged i.Ref, as a docker-archive tarball
// (what `kind load image-archive` and `docker load` read).
func (i *Image) WriteTarball(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, i.Ref, i.Image); err != nil {
		return fmt.Errorf("ociimage: writing %s: %w", path, err)
	}
	return nil
}

// WriteLayout writes the image into an OCI image layout at dir, replacing
// what was there.
func (i *Image) WriteLayout(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("ociimage: OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(i.Image, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": i.Ref.String(),
	})); err != nil {
		return fmt.Errorf("ociimage: OCI layout %s: %w", dir, err)
	}
	return nil
}
