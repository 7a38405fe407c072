package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/hotcert/hotcert/hack/image/ociimage"
)

const (
	repoRoot    = "../.."
	testVersion = "0.0.0-imagetest"
)

// TestImage builds the controller image as `make image` does, twice, and
// checks what a user loads: the same digest both times; a tarball that
// go-containerregistry reads back under its tag; the config (entrypoint, user
// 65532, labels with the version); one layer with the binary alone (no shell);
// a static binary that runs from the extracted layer and reports the version.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	tarPath, layoutPath := filepath.Join(dir, "img.tar"), filepath.Join(dir, "oci")
	args := []string{"-dir", repoRoot, "-pkg", "./cmd/hotcert-controller", "-version", testVersion,
		"-repository", "hotcert.local/hotcert-controller", "-tarball", tarPath, "-layout", layoutPath}
	var out bytes.Buffer
	if err := run(args, &out); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`digest (sha256:[0-9a-f]{64}) id (sha256:[0-9a-f]{64})`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no digest and id in %q", out.String())
	}
	printed, printedID := m[1], m[2]
	checkDocumentedSize(t, out.String())
	checkReproducible(t)

	tag, err := name.NewTag("hotcert.local/hotcert-controller:" + testVersion)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatalf("the tarball does not hold %s: %v", tag, err)
	}
	if id, err := img.ConfigName(); err != nil || id.String() != printedID {
		t.Fatalf("tarball image id %s (%v), built %s", id, err, printedID)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; !slices.Equal(got, []string{"/hotcert-controller"}) {
		t.Errorf("entrypoint %v", got)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if !maps.Equal(cf.Config.Labels, ociimage.Labels("hotcert-controller", testVersion)) || cf.Config.Labels["org.opencontainers.image.version"] != testVersion {
		t.Errorf("labels %v", cf.Config.Labels)
	}
	if cf.Created.Unix() != 0 {
		t.Errorf("created %v: want the fixed epoch", cf.Created)
	}

	// The OCI layout holds the same image.
	p, err := layout.FromPath(layoutPath)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != printed {
		t.Fatalf("OCI layout index %+v (%v), want the one image %s", im, err, printed)
	}
	if mt := im.Manifests[0].MediaType; mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}

	// The file system: the binary and nothing else.
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	files := map[string]*tar.Header{}
	bin := filepath.Join(dir, "hotcert-controller")
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if h.Name == "hotcert-controller" {
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(files) != 1 || files["hotcert-controller"] == nil {
		t.Fatalf("image files %v, want hotcert-controller alone (no shell)", slices.Collect(maps.Keys(files)))
	}
	if h := files["hotcert-controller"]; h.Mode != 0o755 || h.ModTime.Unix() != 0 || h.Uid != 0 {
		t.Errorf("binary mode %o, mtime %v, uid %d", h.Mode, h.ModTime, h.Uid)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked (it has an ELF interpreter)")
		}
	}
	got, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, got)
	}
	if !strings.Contains(string(got), testVersion) {
		t.Fatalf("--version printed %q, want %s", got, testVersion)
	}
}

// checkReproducible builds the image twice and checks the digests are equal.
// The two builds must see the same sources: in a working tree others edit,
// a pair of builds across an edit is discarded and built again.
func checkReproducible(t *testing.T) {
	t.Helper()
	spec := ociimage.Spec{Dir: repoRoot, Package: "./cmd/hotcert-controller", Version: testVersion, Repository: "hotcert.local/hotcert-controller"}
	for range 3 {
		before := sourceHash(t)
		a, err := ociimage.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ociimage.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		if sourceHash(t) != before {
			continue // the sources changed between the builds
		}
		if a.Digest != b.Digest || a.ID != b.ID {
			t.Fatalf("two builds of the same sources have digests %s and %s, ids %s and %s", a.Digest, b.Digest, a.ID, b.ID)
		}
		return
	}
	t.Fatal("the sources changed during every pair of builds")
}

// sourceHash hashes the files of the workspace's packages the binary is built
// from (the module cache's never change).
func sourceHash(t *testing.T) [32]byte {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/hotcert-controller")
	cmd.Dir = repoRoot
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	h := sha256.New()
	for _, f := range strings.Fields(string(list)) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(f))
		h.Write(data)
	}
	return [32]byte(h.Sum(nil))
}
