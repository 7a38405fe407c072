package hotcert_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportersGetALeanModuleGraph builds a scratch module that imports only the
// TLS library (the root package and tlsconfig) and checks its module graph: no
// Kubernetes, controller-runtime, cobra or JWT module may reach an importer.
func TestImportersGetALeanModuleGraph(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/importer\n\ngo 1.26.0\n\nrequire github.com/hotcert/hotcert v0.0.0-00010101000000-000000000000\n\nreplace github.com/hotcert/hotcert => "+root+"\n")
	write("main.go", `package main

import (
	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/tlsconfig"
)

var _ = tlsconfig.Server
var _ hotcert.Source

func main() {}
`)
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	graph := goCmd("mod", "graph")
	for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/spf13/cobra", "github.com/golang-jwt/", "github.com/go-jose/"} {
		for line := range strings.SplitSeq(graph, "\n") {
			if strings.Contains(line, banned) {
				t.Errorf("the importer's module graph has %s: %s", banned, line)
				break
			}
		}
	}
	if !strings.Contains(graph, "github.com/fsnotify/fsnotify") {
		t.Errorf("the graph does not list the library's own dependencies; is the check looking at the right module?\n%s", graph)
	}
}

// TestModulesMeetOnlyAtPublicSeams checks every module of the workspace (go.work)
// for the two ways a module can tie itself to another module's internals, which
// break as soon as minimal version selection pairs it with another version of that
// module (open-telemetry/opentelemetry-go#3846):
//
//   - a package imports another module's internal/ package (Go allows it: internal
//     visibility follows the import path, not the module);
//   - an exported identifier of a non-internal, non-main package names a type of an
//     internal/ package in its signature: exported funcs, exported methods of
//     exported types, exported struct fields, exported interface methods and
//     embedded interfaces, exported types, and the types of exported vars and consts
//     (for one declared without a type, its initializer must not use an internal
//     package: a conservative stand-in for its inferred type).
//
// Test files are exempt from the first check: they are compiled only by their own
// module's tests, which run in this workspace at one commit (internal/testutil and
// internal/kubetest serve every module's tests that way), never by an importer's
// build, so no version skew can reach them.
func TestModulesMeetOnlyAtPublicSeams(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	goList := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"), "GOFLAGS=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	modules := strings.Fields(string(goList("-m", "-f", "{{.Path}}")))
	if len(modules) < 2 {
		t.Fatalf("go.work lists %d module(s); is the workspace in use?", len(modules))
	}
	patterns := make([]string, len(modules))
	for i, m := range modules {
		patterns[i] = m + "/..."
	}
	pkgs := decodePackages(t, goList(append([]string{"-e", "-json=ImportPath,Name,Dir,GoFiles,CgoFiles,Imports,Module,Error"}, patterns...)...))
	byPath := make(map[string]*listedPackage, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	if byPath["github.com/hotcert/hotcert/jwtkeys"] == nil || byPath["github.com/hotcert/hotcert/reload"] == nil {
		t.Fatalf("go list found %d packages, not the workspace's", len(pkgs))
	}

	for _, p := range pkgs {
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
			continue
		}
		for _, imp := range p.Imports {
			if q := byPath[imp]; q != nil && isInternal(imp) && q.Module.Path != p.Module.Path {
				t.Errorf("%s (module %s) imports %s, an internal package of module %s", p.ImportPath, p.Module.Path, imp, q.Module.Path)
			}
		}
		if p.Name == "main" || isInternal(p.ImportPath) {
			continue
		}
		for _, v := range exportedInternalTypes(t, p, byPath) {
			t.Errorf("%s: %s", p.ImportPath, v)
		}
	}
}

type listedPackage struct {
	ImportPath, Name, Dir string
	GoFiles, CgoFiles     []string
	Imports               []string
	Module                struct{ Path string }
	Error                 *struct{ Err string }
}

func decodePackages(t *testing.T, out []byte) []*listedPackage {
	t.Helper()
	var pkgs []*listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// isInternal reports whether path is an internal package (has an "internal" element).
func isInternal(path string) bool { return slices.Contains(strings.Split(path, "/"), "internal") }

// exportedInternalTypes returns the exported declarations of p whose signatures
// name a type of an internal package, described for a test failure.
func exportedInternalTypes(t *testing.T, p *listedPackage, byPath map[string]*listedPackage) []string {
	t.Helper()
	fset := token.NewFileSet()
	var found []string
	for _, name := range append(slices.Clone(p.GoFiles), p.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		// The names this file gives internal packages: a selector X.Y whose X is
		// one of them names a declaration of that package.
		internal := map[string]string{}
		for _, spec := range f.Imports {
			path := strings.Trim(spec.Path.Value, `"`)
			if !isInternal(path) {
				continue
			}
			local := path[strings.LastIndex(path, "/")+1:]
			if q := byPath[path]; q != nil {
				local = q.Name
			}
			if spec.Name != nil {
				local = spec.Name.Name
			}
			internal[local] = path
		}
		if len(internal) == 0 {
			continue
		}
		check := func(what string, n ast.Node) {
			if n == nil {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] != "" {
					found = append(found, fmt.Sprintf("%s: %s names %s.%s (%s)", fset.Position(sel.Pos()), what, x.Name, sel.Sel.Name, internal[x.Name]))
				}
				return true
			})
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				what := "func " + d.Name.Name
				if d.Recv != nil {
					recv := receiverType(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					what = "method " + recv + "." + d.Name.Name
				}
				check(what, d.Type)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							checkType(check, "type "+s.Name.Name, s)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							check(d.Tok.String()+" "+n.Name, s.Type)
							if s.Type == nil {
								for _, v := range s.Values {
									check(d.Tok.String()+" "+n.Name+"'s initializer", v)
								}
							}
						}
					}
				}
			}
		}
	}
	return found
}

// checkType checks what an exported type shows its users: its type parameters, and
// for a struct its exported fields, for an interface its exported methods and
// embedded interfaces, for any other type (an alias included) the whole definition.
func checkType(check func(string, ast.Node), what string, s *ast.TypeSpec) {
	if s.TypeParams != nil {
		check(what+"'s type parameters", s.TypeParams)
	}
	var fields []*ast.Field
	switch ty := s.Type.(type) {
	case *ast.StructType:
		fields = ty.Fields.List
	case *ast.InterfaceType:
		fields = ty.Methods.List
	default:
		check(what, s.Type)
		return
	}
	for _, f := range fields {
		if len(f.Names) == 0 { // embedded: its name is its type's
			check(what+" (embedded)", f.Type)
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				check(what+"."+n.Name, f.Type)
			}
		}
	}
}

// receiverType returns the name of a method's receiver type (T of T, *T, T[P]).
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
