// Command image builds the OCI image of a hotcert binary without a container
// engine or a registry: it compiles the binary statically (CGO_ENABLED=0,
// -trimpath, no VCS stamp) and puts it alone on an empty base with
// go-containerregistry, as the non-root user 65532, with no shell and fixed
// timestamps, so that a rebuild of the same source has the same digest.
//
//	go run ./hack/image -pkg ./cmd/hotcert-controller -version 0.1.0 \
//	    -repository hotcert.local/hotcert-controller -tarball .bin/image/hotcert-controller.tar
//
// The tarball loads with `kind load image-archive`, `docker load` or
// `podman load`; -layout also writes an OCI image layout (for skopeo or crane).
// `make image` runs it; the image's layer, config and labels are defined in
// package ociimage, which `make release` also builds its multi-platform index
// with.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hotcert/hotcert/hack/image/ociimage"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds the image the command line describes and writes it out.
func run(args []string, stdout io.Writer) error {
	var s ociimage.Spec
	var tarPath, layoutPath string
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&s.Dir, "dir", ".", "directory of the Go module or workspace the package is built in")
	fs.StringVar(&s.Package, "pkg", "./cmd/hotcert-controller", "main package of the binary")
	fs.StringVar(&s.Version, "version", "", "version the binary reports and the image is labelled and tagged with (required)")
	fs.StringVar(&s.Repository, "repository", "hotcert.local/hotcert-controller", "image repository the tarball names (tag: -version)")
	fs.StringVar(&s.GOARCH, "goarch", "", "target architecture (default: this machine's)")
	fs.StringVar(&tarPath, "tarball", "", "write the image as a tarball (docker-archive format) to this file")
	fs.StringVar(&layoutPath, "layout", "", "also write the image into an OCI image layout at this directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.Version == "" || tarPath == "" {
		return fmt.Errorf("-version and -tarball are required")
	}
	img, err := ociimage.Build(s)
	if err != nil {
		return err
	}
	if err := img.WriteTarball(tarPath); err != nil {
		return err
	}
	if layoutPath != "" {
		if err := img.WriteLayout(layoutPath); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "image: %s digest %s id %s (%d bytes compressed, %d bytes binary) in %s\n",
		img.Ref, img.Digest, img.ID, img.CompressedSize, img.BinarySize, tarPath)
	return nil
}
