package controller

import (
	"bytes"
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/hotcert/hotcert/rollout"
)

// TestGitOpsReapplyKeepsTheStampAndDoesNotLoop: a GitOps tool re-applies the
// original manifest of a workload the controller adopted and rolled, by
// server-side apply under its own field manager (with and without force) or
// by kubectl's client-side three-way merge. The stamp and the recorded state
// survive, nothing rolls again (no pod-template change, no ReplicaSet) on the
// next reconcile, on an unrelated event nor after a controller restart; the
// fields the controller wrote are owned by hotcert-controller alone; a user's
// pod-template edit in Git rolls once (Kubernetes does) and the controller
// does not add a second rollout; a real Secret change still rolls exactly once.
func TestGitOpsReapplyKeepsTheStampAndDoesNotLoop(t *testing.T) {
	t.Parallel()
	for _, a := range gitopsAppliers {
		for _, tmplAnn := range []map[string]string{nil, {"prometheus.io/scrape": "true"}} {
			name := a.name
			if tmplAnn != nil {
				name += "/template-annotations"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				gitopsReapply(t, a, tmplAnn)
			})
		}
	}
}

func gitopsReapply(t *testing.T, a gitopsApplier, tmplAnn map[string]string) {
	ns := env.NewNamespace(t)
	changes := templateChanges(t, ns)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1", "unused": "1"}))
	manifest := gitopsManifest(ns, tmplAnn)
	a.apply(t, manifest)
	waitReplicaSets(t, ns, "app", 1)
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")

	updateSecret(t, ns, "s", setKey("a", "2"))
	waitFor(t, "the rollout", func() (bool, error) { return rollout.Stamped(&getDeployment(t, ns, "app").Spec.Template) != "", nil })
	waitReplicaSets(t, ns, "app", 2)
	rolled := controllerFields(getDeployment(t, ns, "app"))
	for k, v := range rolled {
		if v == "" {
			t.Fatalf("after the rollout, %s is not set: %v", k, rolled)
		}
	}

	// The tool re-applies the manifest from Git, again and again.
	for range 3 {
		a.apply(t, manifest)
	}
	d := getDeployment(t, ns, "app")
	if got := controllerFields(d); !maps.Equal(got, rolled) {
		t.Fatalf("after re-applying the manifest: the controller's fields are %v, were %v", got, rolled)
	}
	if got := slices.Sorted(maps.Keys(d.Spec.Template.Annotations)); !slices.Equal(got, slices.Sorted(maps.Keys(with(tmplAnn, rollout.AnnotationConfigHash, "")))) {
		t.Fatalf("pod-template annotations %v, want the manifest's and the stamp", d.Spec.Template.Annotations)
	}
	checkOwnership(t, d, a.manager)

	// The next reconcile, an unrelated event (an unconsumed key changes) and a
	// controller restart: no rollout.
	s := updateSecret(t, ns, "s", setKey("unused", "2"))
	waitFor(t, "a reconcile after the re-apply", func() (bool, error) { return c.digested(rollout.KindSecret, "s", s.ResourceVersion), nil })
	c.Stop()
	c = startController(t, ns, testOptions())
	waitFor(t, "the restarted controller's reconcile", func() (bool, error) { return c.digested(rollout.KindSecret, "s", s.ResourceVersion), nil })
	noMoreRollouts(t, ns, changes, 1)
	a.apply(t, manifest)
	noMoreRollouts(t, ns, changes, 1)

	// A user adds a pod-template annotation in Git: Kubernetes rolls (the
	// edit), the controller does not roll a second time, the stamp stays.
	edited := gitopsManifest(ns, with(tmplAnn, "example.com/team", "payments"))
	a.apply(t, edited)
	waitFor(t, "the user's rollout", func() (bool, error) { return changes("app") == 2, nil })
	waitReplicaSets(t, ns, "app", 3)
	s = updateSecret(t, ns, "s", setKey("unused", "3"))
	waitFor(t, "a reconcile after the edit", func() (bool, error) { return c.digested(rollout.KindSecret, "s", s.ResourceVersion), nil })
	noMoreRollouts(t, ns, changes, 2)
	d = getDeployment(t, ns, "app")
	if got := controllerFields(d); !maps.Equal(got, rolled) {
		t.Fatalf("after the user's edit: the controller's fields are %v, were %v", got, rolled)
	}
	checkOwnership(t, d, a.manager)

	// A real change still rolls, exactly once, and the tool's next re-apply
	// keeps the new stamp.
	updateSecret(t, ns, "s", setKey("a", "3"))
	waitFor(t, "the second rollout", func() (bool, error) {
		return rollout.Stamped(&getDeployment(t, ns, "app").Spec.Template) != rolled[rollout.AnnotationConfigHash], nil
	})
	a.apply(t, edited)
	noMoreRollouts(t, ns, changes, 3)
	d = getDeployment(t, ns, "app")
	if got := rollout.Stamped(&d.Spec.Template); got == rolled[rollout.AnnotationConfigHash] || got != d.Annotations[rollout.AnnotationAppliedHash] {
		t.Fatalf("after the second rollout and a re-apply: stamp %q, applied hash %q (first stamp %q)", got, d.Annotations[rollout.AnnotationAppliedHash], rolled[rollout.AnnotationConfigHash])
	}
	checkOwnership(t, d, a.manager)
	if n := c.counter("Deployment", resultRolled, reasonConfigChanged); n != 1 {
		t.Fatalf("the restarted controller counted %d rollouts, want 1 (the second Secret change)", n)
	}
}

// noMoreRollouts checks that the Deployment's pod template changed exactly n
// times and that it has n+1 ReplicaSets, and that this holds.
func noMoreRollouts(t *testing.T, ns string, changes func(string) int, n int) {
	t.Helper()
	check := func() (bool, error) { return changes("app") == n && replicaSets(t, ns, "app") == n+1, nil }
	waitFor(t, "the rollouts to settle", check)
	holds(t, 1500*time.Millisecond, "no further rollout", check)
}

// gitopsManifest is the Deployment as it is kept in Git: opted in, consuming
// key a of Secret s, with the given pod-template annotations.
func gitopsManifest(ns string, tmplAnn map[string]string) *unstructured.Unstructured {
	return gitopsManifestOf("Deployment", ns, tmplAnn)
}

// gitopsManifestOf is gitopsManifest for a workload of another kind.
func gitopsManifestOf(kind, ns string, tmplAnn map[string]string) *unstructured.Unstructured {
	tmplMeta := map[string]any{"labels": map[string]any{"app": "app"}}
	if tmplAnn != nil {
		ann := map[string]any{}
		for k, v := range tmplAnn {
			ann[k] = v
		}
		tmplMeta["annotations"] = ann
	}
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       kind,
		"metadata": map[string]any{
			"name": "app", "namespace": ns,
			"annotations": map[string]any{rollout.AnnotationRolloutOnChange: "true"},
		},
		"spec": map[string]any{
			"replicas": int64(0),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "app"}},
			"template": map[string]any{
				"metadata": tmplMeta,
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "app", "image": "registry.invalid/app:1",
					"env": []any{map[string]any{"name": "A", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "a"}}}},
				}}},
			},
		},
	}}
	if kind == "DaemonSet" {
		unstructured.RemoveNestedField(m.Object, "spec", "replicas")
	}
	return m
}

// controllerFields returns the stamp and the state annotations of a workload.
func controllerFields(obj client.Object) map[string]string {
	out := map[string]string{rollout.AnnotationConfigHash: rollout.Stamped(rollout.PodTemplate(obj))}
	for _, k := range stateKeys {
		out[k] = obj.GetAnnotations()[k]
	}
	return out
}

// controllerFieldPaths are the fields the controller writes on a workload,
// derived from its constants: the stamp and the state annotations.
func controllerFieldPaths() [][]string {
	out := [][]string{{"spec", "template", "metadata", "annotations", rollout.AnnotationConfigHash}}
	for _, k := range stateKeys {
		out = append(out, []string{"metadata", "annotations", k})
	}
	return out
}

// controllerPaths are controllerFieldPaths as managedFields name them.
func controllerPaths() []fieldpath.Path {
	var out []fieldpath.Path
	for _, p := range controllerFieldPaths() {
		parts := make([]any, len(p))
		for i, s := range p {
			parts[i] = s
		}
		out = append(out, fieldpath.MakePathOrDie(parts...))
	}
	return out
}

// managedSets returns, per field manager of obj, the fields it owns.
func managedSets(t *testing.T, obj metav1.Object) map[string]*fieldpath.Set {
	t.Helper()
	out := map[string]*fieldpath.Set{}
	for _, e := range obj.GetManagedFields() {
		s := &fieldpath.Set{}
		if e.FieldsV1 != nil {
			if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
				t.Fatalf("managedFields of %s: %v", e.Manager, err)
			}
		}
		if prev, ok := out[e.Manager]; ok {
			s = prev.Union(s)
		}
		out[e.Manager] = s
	}
	return out
}

// checkOwnership checks what the GitOps tool sees in managedFields: the
// controller's fields are owned by hotcert-controller and by no other
// manager, hotcert-controller owns nothing else, and gitops owns fields.
func checkOwnership(t *testing.T, d metav1.Object, gitops string) {
	t.Helper()
	sets := managedSets(t, d)
	if sets[gitops] == nil || sets[gitops].Leaves().Empty() {
		t.Fatalf("managedFields: %s owns nothing (managers %v)", gitops, slices.Sorted(maps.Keys(sets)))
	}
	want := fieldpath.NewSet(controllerPaths()...)
	own := sets[rollout.FieldManager]
	if own == nil || !own.Leaves().Equals(want) {
		got := "nothing"
		if own != nil {
			got = own.Leaves().String()
		}
		t.Fatalf("managedFields: %s owns %s, want exactly %s", rollout.FieldManager, got, want)
	}
	for m, s := range sets {
		if m == rollout.FieldManager {
			continue
		}
		if both := s.Leaves().Intersection(want); !both.Empty() {
			t.Fatalf("managedFields: %s also owns %s", m, both)
		}
	}
}

// TestFluxOverrideManagerWouldTakeTheStamp is what the docs warn against:
// naming hotcert-controller in kustomize-controller's --override-manager
// makes Flux take the controller's fields over (it renames their manager to
// its own) and then remove them, as absent from Git: the stamp goes (a
// rollout back to the previous pod template) and so does the recorded
// state, which the controller records again, with a Warning, without
// rolling. The reapply test above is not blind: this is what it would see.
func TestFluxOverrideManagerWouldTakeTheStamp(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	changes := templateChanges(t, ns)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	manifest := gitopsManifest(ns, nil)
	flux := serverSideApply(fluxManager, true)
	flux(t, manifest)
	waitReplicaSets(t, ns, "app", 1)
	startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")
	updateSecret(t, ns, "s", setKey("a", "2"))
	waitReplicaSets(t, ns, "app", 2)

	if !takeOverFields(t, manifest, rollout.FieldManager, fluxManager) {
		t.Fatal("hotcert-controller owns no fields to take over")
	}
	flux(t, manifest)
	d := getDeployment(t, ns, "app")
	if rollout.Stamped(&d.Spec.Template) != "" {
		t.Fatalf("the stamp survived a Flux that overrides hotcert-controller: %v", d.Spec.Template.Annotations)
	}
	waitEvent(t, ns, "app", eventStateRemoved, "another writer removed")
	// The rollout, and its undoing: back to the first ReplicaSet.
	check := func() (bool, error) { return changes("app") == 2 && replicaSets(t, ns, "app") == 2, nil }
	waitFor(t, "the rollout to be undone", check)
	holds(t, 1500*time.Millisecond, "no further rollout", check)
}

// TestGitOpsManifestCarryingTheControllerFields: a manifest in Git that
// carries the controller's fields (exported from a live cluster after a
// rollout) makes each forced server-side apply put back stale values. Without
// anything more, that is two rollouts per sync, for ever: Git's stamp (a
// rollout back), then the controller's (Git's recorded state no longer
// matches the content). Argo CD's RespectIgnoreDifferences=true with the
// documented paths, or the controller's admission webhook, keep the live
// values: no rollout at all.
func TestGitOpsManifestCarryingTheControllerFields(t *testing.T) {
	t.Parallel()
	paths := snippetJQPaths(t, "argocd-application-paths.yaml")
	for _, tc := range []struct {
		name    string
		webhook bool
		sync    func(t *testing.T, git *unstructured.Unstructured)
		loops   bool
	}{
		{name: "plain", sync: serverSideApply(argoCDManager, true), loops: true},
		{name: "respect-ignore-differences", sync: func(t *testing.T, git *unstructured.Unstructured) {
			serverSideApply(argoCDManager, true)(t, respectIgnoreDifferences(t, git, paths))
		}},
		{name: "webhook", webhook: true, sync: serverSideApply(argoCDManager, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.NewNamespace(t)
			if tc.webhook {
				startWebhook(t, ns)
			}
			changes := templateChanges(t, ns)
			createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
			serverSideApply(argoCDManager, true)(t, gitopsManifest(ns, nil))
			waitReplicaSets(t, ns, "app", 1)
			startController(t, ns, testOptions())
			waitAdopted(t, ns, "app")
			updateSecret(t, ns, "s", setKey("a", "2"))
			waitReplicaSets(t, ns, "app", 2)

			// The live object's fields, committed to Git; then the content
			// changes again and the controller rolls.
			git := gitopsManifest(ns, nil)
			for k, v := range controllerFields(getDeployment(t, ns, "app")) {
				path := []string{"metadata", "annotations", k}
				if k == rollout.AnnotationConfigHash {
					path = []string{"spec", "template", "metadata", "annotations", k}
				}
				if err := unstructured.SetNestedField(git.Object, v, path...); err != nil {
					t.Fatal(err)
				}
			}
			updateSecret(t, ns, "s", setKey("a", "3"))
			waitReplicaSets(t, ns, "app", 3)
			noMoreRollouts(t, ns, changes, 2)
			current := rollout.Stamped(&getDeployment(t, ns, "app").Spec.Template)

			if tc.loops {
				for i := 1; i <= 2; i++ {
					tc.sync(t, git)
					waitFor(t, "Git's stamp and then the controller's", func() (bool, error) {
						return changes("app") == 2+2*i && rollout.Stamped(&getDeployment(t, ns, "app").Spec.Template) == current, nil
					})
				}
				return
			}
			for range 3 {
				tc.sync(t, git)
			}
			noMoreRollouts(t, ns, changes, 2)
			if got := rollout.Stamped(&getDeployment(t, ns, "app").Spec.Template); got != current {
				t.Fatalf("stamp %q after the syncs, want the controller's %q", got, current)
			}
		})
	}
}

// TestGitOpsReapplyOtherKinds: the same for the other kinds the controller
// rolls, StatefulSets and DaemonSets (their rollouts are ControllerRevisions):
// a re-apply by server-side apply (Argo CD, Flux) or client-side merge keeps
// the stamp and the state, owned by hotcert-controller alone, and makes no
// revision, also after the next reconcile.
func TestGitOpsReapplyOtherKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"StatefulSet", "DaemonSet"} {
		for _, a := range gitopsAppliers {
			if a.name != "argocd-ssa" && a.name != "flux" && a.name != "client-side" {
				continue
			}
			t.Run(kind+"/"+a.name, func(t *testing.T) {
				t.Parallel()
				ns := env.NewNamespace(t)
				createSecret(t, secret(ns, "s", map[string]string{"a": "1", "unused": "1"}))
				manifest := gitopsManifestOf(kind, ns, nil)
				a.apply(t, manifest)
				c := startController(t, ns, testOptions())
				live := func() client.Object {
					obj := kindNamed(t, kind).newObj()
					if err := env.Client().Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "app"}, obj); err != nil {
						t.Fatal(err)
					}
					return obj
				}
				waitFor(t, "adoption", func() (bool, error) { return live().GetAnnotations()[rollout.AnnotationAppliedHash] != "", nil })
				updateSecret(t, ns, "s", setKey("a", "2"))
				waitFor(t, "the rollout", func() (bool, error) { return rollout.Stamped(rollout.PodTemplate(live())) != "", nil })
				waitFor(t, "two revisions", func() (bool, error) { return controllerRevisions(t, ns, live()) == 2, nil })
				rolled := controllerFields(live())

				for range 3 {
					a.apply(t, manifest)
				}
				s := updateSecret(t, ns, "s", setKey("unused", "2"))
				waitFor(t, "a reconcile after the re-apply", func() (bool, error) { return c.digested(rollout.KindSecret, "s", s.ResourceVersion), nil })
				holds(t, 1500*time.Millisecond, "no further revision", func() (bool, error) {
					obj := live()
					return controllerRevisions(t, ns, obj) == 2 && maps.Equal(controllerFields(obj), rolled), nil
				})
				checkOwnership(t, live(), a.manager)
			})
		}
	}
}

func kindNamed(t *testing.T, name string) workloadKind {
	t.Helper()
	for _, k := range workloadKinds {
		if k.name == name {
			return k
		}
	}
	t.Fatalf("no workload kind %s", name)
	return workloadKind{}
}
