package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

const (
	repoRoot    = "../.."
	testVersion = "v0.0.0-releasetest"
	testRepo    = "registry.example/hotcert/hotcert-controller"
)

// TestRelease runs the whole release for this machine's platform (and
// linux's, for the image) into a temporary directory, then opens every
// artifact as a user would: runs both binaries' --version, reads the image
// index from the OCI archive, loads and renders the packaged chart, verifies
// SHA256SUMS with sha256sum, decodes the SBOM.
func TestRelease(t *testing.T) {
	platforms := []string{runtime.GOOS + "/" + runtime.GOARCH}
	if runtime.GOOS != "linux" {
		platforms = append(platforms, "linux/"+runtime.GOARCH)
	}
	out := filepath.Join(t.TempDir(), testVersion)
	r, err := Build(Config{Dir: repoRoot, Version: testVersion, Out: out, Repository: testRepo,
		Platforms: platforms, AllowDirty: true, Log: func(msg string) { t.Log(msg) }})
	if err != nil {
		t.Fatal(err)
	}

	// Every file of the release is one this test opens.
	want := []string{sumsFile, chartFile(testVersion), imageFile(testVersion), sbomFile(testVersion)}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		want = append(want, artifactName("hotcert", testVersion, goos, goarch), artifactName("hotcert-controller", testVersion, goos, goarch))
	}
	var got []string
	for _, a := range r.Artifacts {
		got = append(got, a.Name)
	}
	if slices.Sort(want); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Fatalf("artifacts %v, want %v", got, want)
	}

	checkBinaries(t, out, r)
	checkImage(t, out, platforms)
	checkChart(t, filepath.Join(out, chartFile(testVersion)))
	checkSums(t, out, want)
	checkSBOM(t, out, r)
}

// checkBinaries runs the host's binaries and reads every binary's build
// settings: static, -trimpath, the version both ways.
func checkBinaries(t *testing.T, out string, r *Result) {
	t.Helper()
	for _, b := range r.Binaries {
		path := filepath.Join(out, b.File)
		bi, err := buildinfo.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", b.File, err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOOS"] != b.GOOS || settings["GOARCH"] != b.GOARCH {
			t.Errorf("%s built with %v", b.File, settings)
		}
		// Go records no -ldflags with -trimpath: the version set at link
		// time is in the binary's data (and --version prints it below).
		if data, err := os.ReadFile(path); err != nil || !bytes.Contains(data, []byte(testVersion)) {
			t.Errorf("%s does not hold its version (%v)", b.File, err)
		}
		if b.GOOS != runtime.GOOS || b.GOARCH != runtime.GOARCH {
			continue
		}
		got, err := exec.Command(path, "--version").CombinedOutput()
		if want := b.Name() + " version " + testVersion + "\n"; err != nil || string(got) != want {
			t.Errorf("%s --version: %q (%v), want %q", b.File, got, err, want)
		}
	}
}

// checkImage reads the OCI archive: an index tagged repository:version over
// one image per linux platform, each labelled with the version and holding
// the very binary the release ships for its platform.
func checkImage(t *testing.T, out string, platforms []string) {
	t.Helper()
	dir := t.TempDir()
	untar(t, filepath.Join(out, imageFile(testVersion)), dir)
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		t.Fatalf("index.json %+v (%v): want the one index", tm, err)
	}
	d := tm.Manifests[0]
	if d.MediaType != types.OCIImageIndex || d.Annotations["org.opencontainers.image.ref.name"] != testRepo+":"+testVersion {
		t.Fatalf("index.json names %s %v", d.MediaType, d.Annotations)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range im.Manifests {
		got = append(got, m.Platform.String())
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if v := cf.Config.Labels["org.opencontainers.image.version"]; v != testVersion || cf.Architecture != m.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("image %s: version label %q, platform %s/%s", m.Platform, v, cf.OS, cf.Architecture)
		}
		inImage := extractFile(t, img, "hotcert-controller")
		shipped, err := os.ReadFile(filepath.Join(out, artifactName("hotcert-controller", testVersion, "linux", m.Platform.Architecture)))
		if err != nil || sha256.Sum256(inImage) != sha256.Sum256(shipped) {
			t.Errorf("image %s: its binary is not the one the release ships (%v)", m.Platform, err)
		}
	}
	var wantPlatforms []string
	for _, p := range platforms {
		if strings.HasPrefix(p, "linux/") {
			wantPlatforms = append(wantPlatforms, p)
		}
	}
	if !slices.Equal(got, wantPlatforms) {
		t.Errorf("index platforms %v, want %v", got, wantPlatforms)
	}
}

// checkChart loads the packaged chart as Helm does and renders it: the
// release's version and appVersion, and a Deployment running the release's
// image.
func checkChart(t *testing.T, tgz string) {
	t.Helper()
	ch, err := loader.Load(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != testVersion || ch.Metadata.AppVersion != testVersion {
		t.Errorf("chart version %q appVersion %q, want %s", ch.Metadata.Version, ch.Metadata.AppVersion, testVersion)
	}
	vals, err := chartutil.ToRenderValues(ch, nil, chartutil.ReleaseOptions{Name: "hotcert", Namespace: "hotcert-system", Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	if dep := files["hotcert-controller/templates/deployment.yaml"]; !strings.Contains(dep, `image: "`+testRepo+":"+testVersion+`"`) {
		t.Errorf("the chart's Deployment does not run %s:%s:\n%s", testRepo, testVersion, dep)
	}
}

// checkSums verifies SHA256SUMS with sha256sum and checks it lists every
// other file.
func checkSums(t *testing.T, out string, files []string) {
	t.Helper()
	cmd := exec.Command("sha256sum", "--check", "--strict", sumsFile)
	cmd.Dir = out
	if got, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum --check: %v\n%s", err, got)
	}
	f, err := os.Open(filepath.Join(out, sumsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var listed []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		_, name, _ := strings.Cut(sc.Text(), "  ")
		listed = append(listed, name)
	}
	if want := slices.DeleteFunc(slices.Clone(files), func(n string) bool { return n == sumsFile }); !slices.Equal(listed, want) {
		t.Errorf("SHA256SUMS lists %v, want %v", listed, want)
	}
}

// checkSBOM decodes the SBOM with cyclonedx-go: every binary with its
// SHA-256, the modules linked into it with package URLs.
func checkSBOM(t *testing.T, out string, r *Result) {
	t.Helper()
	f, err := os.Open(filepath.Join(out, sbomFile(testVersion)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.BOMFormat != cdx.BOMFormat || bom.Metadata == nil || bom.Metadata.Component == nil || bom.Metadata.Component.Version != testVersion {
		t.Fatalf("BOM format %q metadata %+v", bom.BOMFormat, bom.Metadata)
	}
	comps := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		comps[c.BOMRef] = c
	}
	deps := map[string][]string{}
	for _, d := range *bom.Dependencies {
		deps[d.Ref] = *d.Dependencies
	}
	for _, b := range r.Binaries {
		c, ok := comps[b.File]
		if !ok || c.Hashes == nil || len(*c.Hashes) != 1 {
			t.Fatalf("no component with a hash for %s", b.File)
		}
		data, err := os.ReadFile(filepath.Join(out, b.File))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); (*c.Hashes)[0].Value != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: SBOM hash %s", b.File, (*c.Hashes)[0].Value)
		}
		for _, want := range []string{"pkg:golang/github.com/hotcert/hotcert@" + testVersion, "pkg:golang/github.com/hotcert/hotcert/cmd@" + testVersion} {
			if !slices.Contains(deps[b.File], want) {
				t.Errorf("%s: SBOM dependencies lack %s", b.File, want)
			}
		}
		var cobra bool
		for _, ref := range deps[b.File] {
			if c, ok := comps[ref]; !ok {
				t.Errorf("%s depends on %s, which is no component", b.File, ref)
			} else if c.Name == "github.com/spf13/cobra" && strings.HasPrefix(c.Version, "v") && c.PackageURL == ref {
				cobra = true
			}
		}
		if !cobra {
			t.Errorf("%s: SBOM lacks github.com/spf13/cobra", b.File)
		}
	}
}

// untar extracts the tar file into dir.
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// extractFile returns the file name of img's file system.
func extractFile(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s in the image: %v", name, err)
		}
		if h.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}
