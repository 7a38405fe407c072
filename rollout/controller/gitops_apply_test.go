package controller

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/client-go/util/retry"
)

// Field managers of the GitOps tools, as they name themselves.
const (
	argoCDManager = "argocd-controller"         // Argo CD, ServerSideApply=true
	fluxManager   = "kustomize-controller"      // Flux, always server-side apply
	csaManager    = "kubectl-client-side-apply" // kubectl apply, Argo CD's default sync
)

// gitopsApplier re-applies a manifest the way one GitOps tool does.
type gitopsApplier struct {
	name    string
	manager string // the field manager its writes are recorded under
	apply   func(t *testing.T, manifest *unstructured.Unstructured)
}

var gitopsAppliers = []gitopsApplier{
	{"argocd-ssa", argoCDManager, serverSideApply(argoCDManager, true)}, // Argo CD always forces
	{"argocd-ssa-no-force", argoCDManager, serverSideApply(argoCDManager, false)},
	{"flux", fluxManager, serverSideApply(fluxManager, true)}, // Flux always forces
	{"flux-no-force", fluxManager, serverSideApply(fluxManager, false)},
	{"client-side", csaManager, clientSideApply},
	// Argo CD switched to ServerSideApply=true on an application synced
	// client-side so far: it migrates kubectl's fields to its own manager
	// (csaupgrade), then applies server-side.
	{"argocd-csa-then-ssa", argoCDManager, csaThenSSA},
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// workloadResource returns the resource of a workload kind the controller
// rolls, and an empty object of its type (for strategic merge patches).
func workloadResource(t *testing.T, kind string) (schema.GroupVersionResource, runtime.Object) {
	t.Helper()
	switch kind {
	case "Deployment":
		return appsv1.SchemeGroupVersion.WithResource("deployments"), &appsv1.Deployment{}
	case "StatefulSet":
		return appsv1.SchemeGroupVersion.WithResource("statefulsets"), &appsv1.StatefulSet{}
	case "DaemonSet":
		return appsv1.SchemeGroupVersion.WithResource("daemonsets"), &appsv1.DaemonSet{}
	}
	t.Fatalf("no workload kind %q", kind)
	return schema.GroupVersionResource{}, nil
}

// resourceOf returns the client of obj's kind in obj's namespace.
func resourceOf(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvr, _ := workloadResource(t, obj.GetKind())
	return dynamicClient(t).Resource(gvr).Namespace(obj.GetNamespace())
}

// serverSideApply applies a manifest as Argo CD (ServerSideApply=true) and
// Flux's kustomize-controller do: server-side apply under their manager.
func serverSideApply(manager string, force bool) func(t *testing.T, manifest *unstructured.Unstructured) {
	return func(t *testing.T, manifest *unstructured.Unstructured) {
		t.Helper()
		if _, err := resourceOf(t, manifest).Apply(testContext(t), manifest.GetName(), manifest,
			metav1.ApplyOptions{FieldManager: manager, Force: force}); err != nil {
			t.Fatalf("server-side apply as %s (force %v): %v", manager, force, err)
		}
	}
}

// clientSideApply applies a manifest as `kubectl apply` (and Argo CD's
// default sync) does: a three-way strategic merge patch between the last
// applied configuration (annotation), the manifest and the live object; a
// create with the annotation when there is no live object.
func clientSideApply(t *testing.T, manifest *unstructured.Unstructured) {
	t.Helper()
	ctx := testContext(t)
	res := resourceOf(t, manifest)
	_, typed := workloadResource(t, manifest.GetKind())
	modified := withLastApplied(t, manifest)
	live, err := res.Get(ctx, manifest.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(modified); err != nil {
			t.Fatal(err)
		}
		if _, err := res.Create(ctx, obj, metav1.CreateOptions{FieldManager: csaManager}); err != nil {
			t.Fatalf("client-side apply (create): %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	current, err := live.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	meta, err := strategicpatch.NewPatchMetaFromStruct(typed)
	if err != nil {
		t.Fatal(err)
	}
	original := []byte(live.GetAnnotations()[corev1.LastAppliedConfigAnnotation])
	patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
	if err != nil {
		t.Fatalf("client-side apply: computing the patch: %v", err)
	}
	if string(patch) == "{}" {
		return // kubectl: "unchanged"
	}
	if _, err := res.Patch(ctx, manifest.GetName(), types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: csaManager}); err != nil {
		t.Fatalf("client-side apply: %v (patch %s)", err, patch)
	}
}

// withLastApplied returns the manifest carrying its own JSON in the
// last-applied-configuration annotation, as kubectl's
// GetModifiedConfiguration does.
func withLastApplied(t *testing.T, manifest *unstructured.Unstructured) []byte {
	t.Helper()
	m := manifest.DeepCopy()
	ann := m.GetAnnotations()
	delete(ann, corev1.LastAppliedConfigAnnotation)
	m.SetAnnotations(ann)
	plain, err := json.Marshal(m.Object)
	if err != nil {
		t.Fatal(err)
	}
	ann[corev1.LastAppliedConfigAnnotation] = string(plain)
	m.SetAnnotations(ann)
	out, err := json.Marshal(m.Object)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// csaThenSSA is Argo CD after ServerSideApply=true was switched on: the
// first sync creates client-side; every later one migrates the client-side
// manager's fields to argocd-controller, as Argo CD does with csaupgrade, and
// applies server-side (forced).
func csaThenSSA(t *testing.T, manifest *unstructured.Unstructured) {
	t.Helper()
	_, err := resourceOf(t, manifest).Get(testContext(t), manifest.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		clientSideApply(t, manifest)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	takeOverFields(t, manifest, csaManager, argoCDManager)
	serverSideApply(argoCDManager, true)(t, manifest)
}

// takeOverFields moves the fields of manager from to manager to on the live
// object of manifest, as Argo CD's client-side apply migration and Flux's
// --override-manager do (csaupgrade; retried on conflict, as Argo CD does:
// the patch tests the resourceVersion). It reports whether from owned any.
func takeOverFields(t *testing.T, manifest *unstructured.Unstructured, from, to string) bool {
	t.Helper()
	ctx := testContext(t)
	res, name := resourceOf(t, manifest), manifest.GetName()
	moved := false
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(from), to)
		if err != nil || patch == nil {
			return err
		}
		_, err = res.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
		moved = err == nil
		return err
	}); err != nil {
		t.Fatalf("moving the fields of %s to %s: %v", from, to, err)
	}
	return moved
}

// respectIgnoreDifferences is what Argo CD's RespectIgnoreDifferences=true
// does to the desired object before a sync (controller/sync.go,
// normalizeTargetResources): the ignored paths are removed from it, and the
// live object's values at those paths (the strategic merge patch from the
// normalized live object to the live one) are patched in.
func respectIgnoreDifferences(t *testing.T, git *unstructured.Unstructured, paths []string) *unstructured.Unstructured {
	t.Helper()
	live, err := resourceOf(t, git).Get(testContext(t), git.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(live.Object, "status")
	normalize := func(doc map[string]any) []byte {
		doc = deepCopyJSON(doc)
		for _, p := range paths {
			var err error
			if doc, err = jqDelete(p, doc); err != nil {
				t.Fatal(err)
			}
		}
		return mustJSON(doc)
	}
	_, typed := workloadResource(t, git.GetKind())
	meta, err := strategicpatch.NewPatchMetaFromStruct(typed)
	if err != nil {
		t.Fatal(err)
	}
	liveJSON := mustJSON(live.Object)
	patch, err := strategicpatch.CreateThreeWayMergePatch(liveJSON, liveJSON, normalize(live.Object), meta, true)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := strategicpatch.StrategicMergePatch(normalize(git.Object), patch, typed)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(patched); err != nil {
		t.Fatal(err)
	}
	return out
}
