package ociimage

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index is a multi-platform image: an OCI image index naming one image per
// platform, under the images' common tag.
type Index struct {
	v1.ImageIndex
	Ref    name.Tag
	Digest v1.Hash
}

// NewIndex returns the index of images, which must share one tag and have
// one platform each.
func NewIndex(images ...*Image) (*Index, error) {
	if len(images) == 0 {
		return nil, fmt.Errorf("ociimage: an index of no image")
	}
	ref := images[0].Ref
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, img := range images {
		if img.Ref != ref {
			return nil, fmt.Errorf("ociimage: index of %s and %s: want one tag", ref, img.Ref)
		}
		p := img.Platform.String()
		if seen[p] {
			return nil, fmt.Errorf("ociimage: two images for %s", p)
		}
		seen[p] = true
		platform := img.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img.Image,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &platform},
		})
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, fmt.Errorf("ociimage: index digest: %w", err)
	}
	return &Index{ImageIndex: idx, Ref: ref, Digest: digest}, nil
}

// WriteLayout writes the index and its images into an OCI image layout at
// dir, replacing what was there; the layout names the index by its tag
// (org.opencontainers.image.ref.name), as [Image.WriteLayout] does an image.
func (x *Index) WriteLayout(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("ociimage: OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(x.ImageIndex, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": x.Ref.String(),
	})); err != nil {
		return fmt.Errorf("ociimage: OCI layout %s: %w", dir, err)
	}
	return nil
}
