package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotcert/hotcert/internal/kubetest"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

var (
	chartDir     = filepath.Join("helm", "hotcert-controller")
	kustomizeDir = "kustomize"
)

// kustomize builds deploy/kustomize/<path> as `kubectl kustomize` does.
func kustomize(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(kustomizeDir, path))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", path, err)
	}
	raw, err := rm.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", path, err)
	}
	return kubetest.DecodeYAML(t, raw)
}

// helmTemplate renders the chart as `helm template --include-crds` does, after
// `helm lint` with the same values found nothing worse than information.
func helmTemplate(t testing.TB, release, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	out, err := helmTemplateErr(t, release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helmTemplateErr is helmTemplate, returning the error of a template that
// fails (Helm's `required`, notably).
func helmTemplateErr(t testing.TB, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	if msgs := lintMessages(values, namespace); len(msgs) > 0 {
		t.Fatalf("helm lint:\n%s", strings.Join(msgs, "\n"))
	}
	var out bytes.Buffer
	for _, crd := range ch.CRDObjects() {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") || strings.TrimSpace(files[name]) == "" {
			continue // NOTES.txt, helpers, templates switched off
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, files[name])
	}
	return kubetest.DecodeYAML(t, out.Bytes()), nil
}

// lintMessages runs Helm's linter with values and returns its warnings and
// errors.
func lintMessages(values map[string]any, namespace string) []string {
	var out []string
	for _, m := range lint.All(chartDir, values, namespace, false).Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m.Error())
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}
