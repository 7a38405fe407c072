package main

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hotcert/hotcert/hack/image/ociimage"
)

// imageFile is the name of the release's image: an OCI archive (`skopeo
// copy oci-archive:FILE docker://…` and `crane push` read it).
func imageFile(version string) string { return fmt.Sprintf("hotcert-controller_%s_oci.tar", version) }

// writeImage builds the controller's image index from its linux binaries in
// built and writes it as an OCI archive into c.Out.
func writeImage(c Config, built []Built) (*ociimage.Index, error) {
	var images []*ociimage.Image
	for _, b := range built {
		if b.Package != controllerPkg || b.GOOS != "linux" {
			continue
		}
		content, err := os.ReadFile(filepath.Join(c.Out, b.File))
		if err != nil {
			return nil, err
		}
		img, err := ociimage.FromBinary(b.Binary, content, c.Repository)
		if err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("no linux platform among %v: the image needs one", c.Platforms)
	}
	idx, err := ociimage.NewIndex(images...)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "hotcert-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := idx.WriteLayout(tmp); err != nil {
		return nil, err
	}
	if err := tarDir(tmp, filepath.Join(c.Out, imageFile(c.Version))); err != nil {
		return nil, err
	}
	return idx, nil
}

// tarDir writes the files under dir into a tar file, in lexical order, with
// fixed times and owners, so that the same tree gives the same bytes.
func tarDir(dir, file string) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("archiving %s: %w", dir, err)
	}
	return tw.Close()
}
