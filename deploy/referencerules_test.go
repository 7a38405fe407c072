package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/internal/kubetest"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkReferenceRules checks, with the base applied, that the ReferenceRule
// CRD is served and accepts the kagent example, that the controller's
// ServiceAccount (impersonated as in as) reads ReferenceRules, and that
// examples/kagent-referencerules/rbac.yaml gives it read access to the kinds
// it names, through the aggregated ClusterRole.
func checkReferenceRules(t *testing.T, objs []*unstructured.Unstructured, as rest.ImpersonationConfig) {
	ctx := testContext(t)
	name := find(objs, "CustomResourceDefinition", "referencerules.hotcert.dev").GetName()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client().Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err
		}
		return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		}), nil
	}); err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}

	var rules []*unstructured.Unstructured
	for _, f := range []string{"kagent-referencerules/referencerules.yaml", "rollout-targets/argo-rollout.yaml", "rollout-targets/cronjob.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, kubetest.DecodeYAML(t, raw)...)
	}
	for _, r := range rules {
		// Dry run: a stored rule would reach the controllers of the
		// package's other tests, whose own rules for these kinds it
		// would clash with (one rule per kind); and under a generated name,
		// since the chain tests store these very rules.
		r.SetGenerateName(r.GetName() + "-")
		r.SetName("")
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
			err = env.Client().Create(ctx, r, client.DryRunAll)
			return !meta.IsNoMatchError(err), nil // the client's discovery may lag the new CRD
		}); werr != nil || err != nil {
			t.Fatalf("the API server rejects ReferenceRule %s: %v %v", r.GetGenerateName(), err, werr)
		}
		if _, declared, _ := unstructured.NestedString(r.Object, "spec", "rollout", "podTemplate"); declared != (r.GetGenerateName() == "argo-rollouts-" || r.GetGenerateName() == "cronjobs-") {
			t.Errorf("ReferenceRule %s: spec.rollout.podTemplate lost or unexpected", r.GetGenerateName())
		}
		if refs, _, _ := unstructured.NestedSlice(r.Object, "spec", "referencedBy"); len(refs) > 0 {
			if f := refs[0].(map[string]any)["format"]; f != "Name" {
				t.Errorf("ReferenceRule %s: format defaulted to %v, want Name", r.GetGenerateName(), f)
			}
		}
	}

	can := func(group, resource, verb string) bool { return allowed(t, as, group, resource, verb) }
	for _, verb := range []string{"get", "list", "watch"} {
		if !can("hotcert.dev", "referencerules", verb) {
			t.Errorf("the controller cannot %s referencerules.hotcert.dev", verb)
		}
	}
	if !can("hotcert.dev", "referencerules/status", "update") {
		t.Error("the controller cannot write the status of referencerules.hotcert.dev")
	}
	if can("hotcert.dev", "referencerules", "update") {
		t.Error("the controller may change ReferenceRules themselves")
	}
	if can("kagent.dev", "agents", "list") {
		t.Fatal("the controller reads agents.kagent.dev before anyone granted it")
	}

	grantAggregated(t, objs, filepath.Join("..", "examples", "kagent-referencerules", "rbac.yaml"))
	for _, resource := range []string{"agents", "modelconfigs"} {
		for _, verb := range []string{"get", "list", "watch"} {
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
				return can("kagent.dev", resource, verb), nil
			}); err != nil {
				t.Errorf("with rbac.yaml, the controller cannot %s %s.kagent.dev", verb, resource)
			}
		}
	}
	if can("kagent.dev", "agents", "patch") {
		t.Error("rbac.yaml grants more than reading")
	}

	// examples/rollout-targets/rbac.yaml: the declared kinds are followed
	// and rolled (patched), nothing more.
	if can("argoproj.io", "rollouts", "list") {
		t.Fatal("the controller reads rollouts.argoproj.io before anyone granted it")
	}
	grantAggregated(t, objs, filepath.Join("..", "examples", "rollout-targets", "rbac.yaml"))
	for _, gr := range [][2]string{{"argoproj.io", "rollouts"}, {"batch", "cronjobs"}} {
		for _, verb := range []string{"get", "list", "watch", "patch"} {
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
				return can(gr[0], gr[1], verb), nil
			}); err != nil {
				t.Errorf("with rollout-targets/rbac.yaml, the controller cannot %s %s.%s", verb, gr[1], gr[0])
			}
		}
		for _, verb := range []string{"update", "delete", "create"} {
			if can(gr[0], gr[1], verb) {
				t.Errorf("rollout-targets/rbac.yaml grants %s on %s.%s", verb, gr[1], gr[0])
			}
		}
	}
}

// allowed asks the API server (a SubjectAccessReview) whether as may verb
// resource ("name" or "name/subresource") of group, cluster-wide.
func allowed(t testing.TB, as rest.ImpersonationConfig, group, resource, verb string) bool {
	t.Helper()
	resource, sub, _ := strings.Cut(resource, "/")
	sar, err := env.Clientset().AuthorizationV1().SubjectAccessReviews().Create(testContext(t), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: as.UserName, Groups: as.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: resource, Subresource: sub, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// grantAggregated creates the one ClusterRole of the file path, checks that
// the controller's aggregated ClusterRole (of objs) selects it, and
// aggregates, as kube-controller-manager would.
func grantAggregated(t *testing.T, objs []*unstructured.Unstructured, path string) {
	t.Helper()
	ctx := testContext(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	grant := kubetest.DecodeYAML(t, raw)
	if len(grant) != 1 || grant[0].GetKind() != "ClusterRole" {
		t.Fatalf("%s: want one ClusterRole, have %d objects", path, len(grant))
	}
	_, aggregated := clusterRoles(t, objs)
	sel, err := metav1.LabelSelectorAsSelector(&aggregated.AggregationRule.ClusterRoleSelectors[0])
	if err != nil || len(aggregated.AggregationRule.ClusterRoleSelectors) != 1 {
		t.Fatalf("aggregation rule %v: %v", aggregated.AggregationRule, err)
	}
	if !sel.Matches(labels.Set(grant[0].GetLabels())) {
		t.Fatalf("the aggregated ClusterRole (%s) does not select %s's labels %v", sel, path, grant[0].GetLabels())
	}
	if err := env.Client().Create(ctx, grant[0]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(testContext(t), grant[0]) })
	// kube-controller-manager's clusterrole-aggregation controller is not
	// among the controllers the test runs: do what it does, set the
	// aggregated ClusterRole's rules to those of the ClusterRoles selected.
	var selected rbacv1.ClusterRoleList
	if err := env.Client().List(ctx, &selected, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	live := &rbacv1.ClusterRole{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: aggregated.Name}, live); err != nil {
		t.Fatal(err)
	}
	live.Rules = nil
	for _, cr := range selected.Items {
		live.Rules = append(live.Rules, cr.Rules...)
	}
	if err := env.Client().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
}

// clusterRoles returns the ClusterRole of rules and the aggregated one (the
// read access to the kinds ReferenceRules name); the census's (named
// *-census) is neither.
func clusterRoles(t testing.TB, objs []*unstructured.Unstructured) (rules, aggregated *rbacv1.ClusterRole) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" || strings.HasSuffix(o.GetName(), "-census") || strings.HasSuffix(o.GetName(), "-census-drive") {
			continue
		}
		cr := convert[rbacv1.ClusterRole](t, o)
		if cr.AggregationRule != nil {
			aggregated = cr
		} else {
			rules = cr
		}
	}
	if rules == nil || aggregated == nil {
		t.Fatalf("want a ClusterRole of rules and an aggregated one, have %v and %v", rules, aggregated)
	}
	return rules, aggregated
}
