package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
)

// gitopsDocs holds the Argo CD and Flux snippets docs/gitops.md shows.
const gitopsDocs = "../../docs/gitops"

// gitopsCRDs are the upstream CRDs the snippets are validated against (the
// header of each file names its release).
var gitopsCRDs = []string{
	"testdata/gitops/argoproj.io_applications.yaml",
	"testdata/gitops/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
}

// snippets returns the objects of every YAML file in docs/gitops, by file.
func snippets(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(gitopsDocs, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no snippets in %s (%v)", gitopsDocs, err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = kubetest.DecodeYAML(t, raw)
	}
	return out
}

// TestGitOpsSnippetsAreValid: every object of docs/gitops passes a
// server-side dry-run create with strict field validation against the real
// upstream CRDs (Argo CD's Application, Flux's Kustomization), and a
// misspelt field would not.
func TestGitOpsSnippetsAreValid(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := env.Client()
	for _, path := range gitopsCRDs {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, crd := range kubetest.DecodeYAML(t, raw) {
			if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("installing %s: %v", path, err)
			}
			waitFor(t, "CRD "+crd.GetName()+" established", func() (bool, error) {
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(crd.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got); err != nil {
					return false, err
				}
				conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
				for _, cond := range conds {
					if m, _ := cond.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
						return true, nil
					}
				}
				return false, nil
			})
		}
	}
	dryRun := func(o *unstructured.Unstructured) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		var err error
		waitFor(t, "the API server to serve "+o.GetKind(), func() (bool, error) {
			err = c.Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
			return !strings.Contains(fmt.Sprint(err), "no matches for kind"), nil
		})
		return err
	}
	kinds := map[string]bool{}
	for file, objs := range snippets(t) {
		for _, o := range objs {
			if err := dryRun(o); err != nil {
				t.Errorf("%s: %s %s: %v", file, o.GetKind(), o.GetName(), err)
			}
			kinds[o.GetKind()] = true
		}
	}
	for _, k := range []string{"Application", "ConfigMap", "Kustomization"} {
		if !kinds[k] {
			t.Errorf("no %s among the snippets", k)
		}
	}

	// The validation is strict: a misspelt field of either CRD is refused.
	for _, bad := range []struct {
		kind  string
		field []string
	}{
		{"Application", []string{"spec", "ignoreDifferencez"}},
		{"Kustomization", []string{"spec", "ignores"}},
	} {
		o := snippetOfKind(t, bad.kind).DeepCopy()
		if err := unstructured.SetNestedField(o.Object, "x", bad.field...); err != nil {
			t.Fatal(err)
		}
		if err := dryRun(o); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s with %s: %v, want an unknown field refused", bad.kind, strings.Join(bad.field, "."), err)
		}
	}
}

func snippetOfKind(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, objs := range snippets(t) {
		for _, o := range objs {
			if o.GetKind() == kind {
				return o
			}
		}
	}
	t.Fatalf("no %s snippet", kind)
	return nil
}

// ignoreRule is what Argo CD reads from an ignoreDifferences entry or an
// argocd-cm resource.customizations.ignoreDifferences value.
type ignoreRule struct {
	Group                 string   `json:"group,omitempty"`
	Kind                  string   `json:"kind,omitempty"`
	JSONPointers          []string `json:"jsonPointers,omitempty"`
	JQPathExpressions     []string `json:"jqPathExpressions,omitempty"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers,omitempty"`
}

// TestGitOpsSnippetsNameTheControllerFields: the fields the snippets ignore
// are exactly the fields the controller writes (derived from its constants,
// those written only where they apply included, and owned by
// hotcert-controller on a workload it rolled): each jq
// expression, evaluated as Argo CD does (del(expression)), and each JSON
// pointer, removed as Argo CD and Flux do, removes one of them from a
// Deployment the controller rolled, together they remove all of them and
// nothing else, and on an object without them they change nothing. The
// managers named are hotcert-controller; the kinds, the ones it rolls.
func TestGitOpsSnippetsNameTheControllerFields(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	serverSideApply(argoCDManager, true)(t, gitopsManifest(ns, nil))
	startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")
	updateSecret(t, ns, "s", setKey("a", "2"))
	var live map[string]any
	waitFor(t, "the rollout", func() (bool, error) {
		d := getDeployment(t, ns, "app")
		if rollout.Stamped(&d.Spec.Template) != "" {
			checkOwnership(t, d, argoCDManager)
			d.APIVersion, d.Kind = "apps/v1", "Deployment"
			raw, err := json.Marshal(d)
			if err != nil {
				return false, err
			}
			live = map[string]any{}
			return true, json.Unmarshal(raw, &live)
		}
		return false, nil
	})
	// The annotations written only where they apply (scheduleKeys: a leaf's
	// validity, a rotate-now token, a change waiting for a window) are not on
	// this Deployment; put them there as the controller would, so that the
	// snippets must name them too.
	anns, _, _ := unstructured.NestedStringMap(live, "metadata", "annotations")
	for _, k := range scheduleKeys {
		if _, ok := anns[k]; !ok {
			anns[k] = "x"
		}
	}
	if err := unstructured.SetNestedStringMap(live, anns, "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "annotations": map[string]any{"a": "b"}}, "data": map[string]any{"k": "v"}}

	var workloadKindNames []string
	for _, k := range workloadKinds {
		workloadKindNames = append(workloadKindNames, k.name)
	}
	checkRules := func(where string, rules []ignoreRule) {
		t.Helper()
		kinds := map[string]bool{}
		var jq, pointers []string
		for _, r := range rules {
			if r.Kind != "" && r.Kind != "*" {
				if r.Group != "apps" || !slices.Contains(workloadKindNames, r.Kind) {
					t.Errorf("%s: a rule for %s/%s, not a kind the controller rolls", where, r.Group, r.Kind)
				}
				kinds[r.Kind] = true
			}
			if len(r.ManagedFieldsManagers) > 0 && !slices.Equal(r.ManagedFieldsManagers, []string{rollout.FieldManager}) {
				t.Errorf("%s: managedFieldsManagers %v, want [%s]", where, r.ManagedFieldsManagers, rollout.FieldManager)
			}
			if len(r.JQPathExpressions) > 0 {
				jq = sameForEveryKind(t, where, jq, r.JQPathExpressions)
			}
			if len(r.JSONPointers) > 0 {
				pointers = sameForEveryKind(t, where, pointers, r.JSONPointers)
			}
		}
		if len(kinds) > 0 && len(kinds) != len(workloadKindNames) {
			t.Errorf("%s: rules for %v, want one for each of %v", where, kinds, workloadKindNames)
		}
		if jq != nil {
			checkRemovals(t, where+" jqPathExpressions", live, cm, jq, jqDelete)
		}
		if pointers != nil {
			checkRemovals(t, where+" jsonPointers", live, cm, pointers, pointerRemove)
		}
	}

	seen := map[string]bool{}
	for file, objs := range snippets(t) {
		for _, o := range objs {
			where := file + ": " + o.GetKind() + " " + o.GetName()
			seen[o.GetKind()] = true
			switch o.GetKind() {
			case "Application":
				var spec struct {
					IgnoreDifferences []ignoreRule `json:"ignoreDifferences"`
				}
				decodeStrictInto(t, where, o.Object["spec"], &spec, "ignoreDifferences")
				if len(spec.IgnoreDifferences) == 0 {
					t.Errorf("%s: no ignoreDifferences", where)
				}
				checkRules(where, spec.IgnoreDifferences)
			case "ConfigMap":
				data, _, _ := unstructured.NestedStringMap(o.Object, "data")
				const key = "resource.customizations.ignoreDifferences.all"
				var r ignoreRule
				if err := yaml.UnmarshalStrict([]byte(data[key]), &r); err != nil || data[key] == "" {
					t.Errorf("%s: %s: %v", where, key, err)
				}
				if len(r.ManagedFieldsManagers) == 0 || len(r.JQPathExpressions) == 0 {
					t.Errorf("%s: %s names no manager or no path: %+v", where, key, r)
				}
				checkRules(where, []ignoreRule{r})
			case "Kustomization":
				var spec struct {
					Ignore []struct {
						Paths  []string `json:"paths"`
						Target struct {
							Group string `json:"group"`
							Kind  string `json:"kind"`
						} `json:"target"`
					} `json:"ignore"`
				}
				decodeStrictInto(t, where, o.Object["spec"], &spec, "ignore")
				if len(spec.Ignore) != 1 {
					t.Fatalf("%s: %d ignore rules, want 1", where, len(spec.Ignore))
				}
				rule := spec.Ignore[0]
				for _, k := range append(workloadKindNames, "ReplicaSet", "Pod") {
					want := slices.Contains(workloadKindNames, k)
					if got := regexp.MustCompile(rule.Target.Kind).MatchString(k); got != want {
						t.Errorf("%s: target kind %q matches %s: %v, want %v", where, rule.Target.Kind, k, got, want)
					}
				}
				if !regexp.MustCompile(rule.Target.Group).MatchString("apps") || regexp.MustCompile(rule.Target.Group).MatchString("apps.example.com") {
					t.Errorf("%s: target group %q, want exactly apps", where, rule.Target.Group)
				}
				checkRules(where, []ignoreRule{{JSONPointers: rule.Paths}})
			default:
				t.Errorf("%s: no check for this kind of snippet", where)
			}
		}
	}
	if !seen["Application"] || !seen["ConfigMap"] || !seen["Kustomization"] {
		t.Errorf("snippets of kinds %v, want an Application, the argocd-cm ConfigMap and a Kustomization", seen)
	}
}

// sameForEveryKind appends paths to acc; each list of paths of a rule is the
// same list (one per kind), so the first is kept and later ones must equal it.
func sameForEveryKind(t *testing.T, where string, acc, paths []string) []string {
	t.Helper()
	if acc == nil {
		return slices.Clone(paths)
	}
	if !slices.Equal(acc, paths) {
		t.Errorf("%s: the rules name different paths: %v and %v", where, acc, paths)
	}
	return acc
}

// decodeStrictInto decodes v (a snippet's spec) into out, keeping only field.
func decodeStrictInto(t *testing.T, where string, v any, out any, field string) {
	t.Helper()
	spec, _ := v.(map[string]any)
	raw, err := json.Marshal(map[string]any{field: spec[field]})
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, out); err != nil {
		t.Fatalf("%s: %s: %v", where, field, err)
	}
}

// checkRemovals checks that each path removes exactly one of the
// controller's fields from live, that together they remove them all, and
// that none changes other (an object without those fields).
func checkRemovals(t *testing.T, where string, live, other map[string]any, paths []string, remove func(path string, doc map[string]any) (map[string]any, error)) {
	t.Helper()
	fields := writtenFieldPaths()
	without := func(f []string) map[string]any {
		u := &unstructured.Unstructured{Object: deepCopyJSON(live)}
		unstructured.RemoveNestedField(u.Object, f...)
		return u.Object
	}
	removed := map[string]bool{}
	for _, p := range paths {
		got, err := remove(p, deepCopyJSON(live))
		if err != nil {
			t.Errorf("%s: %s: %v", where, p, err)
			continue
		}
		var which []string
		for _, f := range fields {
			if reflect.DeepEqual(got, without(f)) {
				which = f
			}
		}
		if which == nil {
			t.Errorf("%s: %s does not remove exactly one of the controller's fields %v", where, p, fields)
			continue
		}
		removed[strings.Join(which, ".")] = true
		if got, err := remove(p, deepCopyJSON(other)); !reflect.DeepEqual(got, other) && !isMissingPath(err) {
			t.Errorf("%s: %s changes an object without the controller's fields: %v, %v", where, p, got, err)
		}
	}
	if len(removed) != len(fields) || len(paths) != len(fields) {
		t.Errorf("%s: %d paths remove %v; the controller writes %v", where, len(paths), removed, fields)
	}
}

// writtenFieldPaths are every field the controller writes on a workload,
// derived from its constants: controllerFieldPaths and the annotations
// written only where they apply (scheduleKeys).
func writtenFieldPaths() [][]string {
	out := controllerFieldPaths()
	for _, k := range scheduleKeys {
		out = append(out, []string{"metadata", "annotations", k})
	}
	return out
}

// jqDelete evaluates del(expr) on doc, as Argo CD's ignoreDifferences does.
func jqDelete(expr string, doc map[string]any) (map[string]any, error) {
	q, err := gojq.Parse("del(" + expr + ")")
	if err != nil {
		return nil, err
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, err
	}
	iter := code.Run(doc)
	v, ok := iter.Next()
	if !ok {
		return nil, fmt.Errorf("no result")
	}
	if err, ok := v.(error); ok {
		return nil, err
	}
	if _, more := iter.Next(); more {
		return nil, fmt.Errorf("more than one result")
	}
	out, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("result %T", v)
	}
	return out, nil
}

// pointerRemove applies an RFC 6902 remove of pointer to doc, as Argo CD's
// jsonPointers and Flux's ignore paths do.
func pointerRemove(pointer string, doc map[string]any) (map[string]any, error) {
	patch, err := jsonpatch.DecodePatch(mustJSON([]map[string]string{{"op": "remove", "path": pointer}}))
	if err != nil {
		return nil, err
	}
	out, err := patch.Apply(mustJSON(doc))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(out, &m)
}

// isMissingPath reports whether err is a remove of a path the document does
// not have, which Argo CD skips (util/argo/normalizers).
func isMissingPath(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "Unable to remove nonexistent key") || strings.Contains(err.Error(), "doc is missing path"))
}

func deepCopyJSON(m map[string]any) map[string]any {
	var out map[string]any
	if err := json.Unmarshal(mustJSON(m), &out); err != nil {
		panic(err)
	}
	return out
}

// snippetJQPaths returns the jq expressions of the first ignoreDifferences
// entry of an Application snippet.
func snippetJQPaths(t *testing.T, file string) []string {
	t.Helper()
	for _, o := range snippets(t)[file] {
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "ignoreDifferences")
		if len(rules) > 0 {
			paths, _, _ := unstructured.NestedStringSlice(rules[0].(map[string]any), "jqPathExpressions")
			if len(paths) > 0 {
				return paths
			}
		}
	}
	t.Fatalf("%s: no jqPathExpressions", file)
	return nil
}
