package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// sbomFile is the name of the release's SBOM.
func sbomFile(version string) string { return fmt.Sprintf("hotcert_%s_sbom.cdx.json", version) }

// ownModule is the path prefix of this repository's modules: in a release
// they are built from the tree at the release's version, whatever their
// requirement says.
const ownModule = "github.com/hotcert/hotcert"

// writeSBOM writes a CycloneDX BOM (JSON) into c.Out describing every binary
// in built, read back from the files as `go version -m` reads them: each
// binary a component (its SHA-256, platform and Go toolchain), each Go module
// linked into one a component (its package URL and go.sum hash), and which
// binary holds which module.
func writeSBOM(c Config, built []Built) error {
	bom := cdx.NewBOM()
	root := cdx.Component{
		BOMRef: purl(ownModule, c.Version), Type: cdx.ComponentTypeApplication,
		Name: "hotcert", Version: c.Version, PackageURL: purl(ownModule, c.Version),
		Description: "TLS certificate hot-reload library, rollout controller and CLI",
	}
	bom.Metadata = &cdx.Metadata{
		Component: &root,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "hotcert hack/release", Version: c.Version,
		}}},
	}
	modules := map[string]cdx.Component{}
	var binaries []cdx.Component
	var deps []cdx.Dependency
	serial := sha256.New()
	for _, b := range built {
		path := filepath.Join(c.Out, b.File)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		serial.Write(sum[:])
		bi, err := buildinfo.ReadFile(path)
		if err != nil {
			return fmt.Errorf("sbom: build info of %s: %w", b.File, err)
		}
		var refs []string
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			comp := moduleComponent(m, c.Version)
			modules[comp.BOMRef] = comp
			refs = append(refs, comp.BOMRef)
		}
		slices.Sort(refs)
		binaries = append(binaries, cdx.Component{
			BOMRef: b.File, Type: cdx.ComponentTypeApplication, Name: b.Name(), Version: c.Version,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
			Properties: &[]cdx.Property{
				{Name: "hotcert:file", Value: b.File},
				{Name: "hotcert:goos", Value: b.GOOS},
				{Name: "hotcert:goarch", Value: b.GOARCH},
				{Name: "hotcert:go", Value: bi.GoVersion},
			},
		})
		deps = append(deps, cdx.Dependency{Ref: b.File, Dependencies: &refs})
	}
	components := binaries
	for _, ref := range slices.Sorted(maps.Keys(modules)) {
		components = append(components, modules[ref])
	}
	bom.Components = &components
	files := make([]string, 0, len(binaries))
	for _, b := range binaries {
		files = append(files, b.BOMRef)
	}
	deps = append([]cdx.Dependency{{Ref: root.BOMRef, Dependencies: &files}}, deps...)
	bom.Dependencies = &deps
	// The serial number is derived from what the BOM describes, so the same
	// binaries give the same BOM.
	serial.Write([]byte(c.Version))
	bom.SerialNumber = uuidURN(serial.Sum(nil))
	f, err := os.Create(filepath.Join(c.Out, sbomFile(c.Version)))
	if err != nil {
		return err
	}
	enc := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		f.Close()
		return fmt.Errorf("sbom: %w", err)
	}
	return f.Close()
}

// moduleComponent is the component of a module linked into a binary.
func moduleComponent(m *debug.Module, release string) cdx.Component {
	path, version, sum := m.Path, m.Version, m.Sum
	if m.Replace != nil {
		path, version, sum = m.Replace.Path, m.Replace.Version, m.Replace.Sum
	}
	if m.Path == ownModule || strings.HasPrefix(m.Path, ownModule+"/") {
		path, version, sum = m.Path, release, ""
	}
	c := cdx.Component{BOMRef: purl(path, version), Type: cdx.ComponentTypeLibrary, Name: path, Version: version, PackageURL: purl(path, version)}
	if sum != "" {
		c.Properties = &[]cdx.Property{{Name: "go:module:sum", Value: sum}}
	}
	return c
}

// purl is a Go module's package URL (pkg:golang/PATH@VERSION).
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + strings.ReplaceAll(version, "+", "%2B")
}

// uuidURN formats the first 16 bytes of h as a version 5 (name-based) UUID URN.
func uuidURN(h []byte) string {
	u := slices.Clone(h[:16])
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	x := hex.EncodeToString(u)
	return fmt.Sprintf("urn:uuid:%s-%s-%s-%s-%s", x[:8], x[8:12], x[12:16], x[16:20], x[20:])
}
