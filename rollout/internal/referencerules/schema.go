package referencerules

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// crdResource is the resource of CustomResourceDefinitions.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// SchemaCheck is what the CRD of a declared kind says of the field a rollout
// of it writes: the rule's ConditionRolloutFieldKept. Its zero value (a rule
// without a rollout, a kind that is not a CRD's) is no condition.
type SchemaCheck struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// checkSchemas checks, for each rule with a rollout, that the CRD of its kind
// keeps the field its rollouts write, and logs each rule's new finding that
// the field is pruned. Start's goroutine only.
func (l *Live) checkSchemas(ctx context.Context, rules []v1alpha1.ReferenceRule) {
	checks := map[string]SchemaCheck{}
	for _, r := range rules {
		if r.Spec.Rollout == nil {
			continue
		}
		c := l.checkSchema(ctx, r)
		if c.Status == "" {
			continue
		}
		checks[r.Name] = c
		if c.Status == metav1.ConditionFalse && l.schemas[r.Name] != c {
			l.logger.Error(nil, "a ReferenceRule's rollout writes a field the CRD's schema prunes: every rollout of the kind will be refused until the rule or the CRD is fixed",
				"rule", r.Name, "kind", r.Spec.Target.GVK().String(), "problem", c.Message)
		}
	}
	l.schemas = checks
}

// checkSchema reads the CRD of rule's kind and looks in the schema of the
// rule's version for the field Target.Roll writes.
func (l *Live) checkSchema(ctx context.Context, rule v1alpha1.ReferenceRule) SchemaCheck {
	gvk := rule.Spec.Target.GVK()
	t, err := compileTarget(rule.Name, gvk, rule.Spec.Rollout)
	if err != nil {
		return SchemaCheck{} // set aside with its own error already
	}
	m, err := l.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return SchemaCheck{}
	}
	name := m.Resource.Resource + "." + m.Resource.Group
	crd, err := l.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return SchemaCheck{} // a built-in or aggregated kind: no CRD schema to read
	case err != nil:
		return SchemaCheck{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonSchemaUnknown,
			Message: fmt.Sprintf("cannot read CustomResourceDefinition %s to check %s against its schema (may the controller get customresourcedefinitions?): %v; every rollout is checked by the API server still", name, t.RollPath(), err)}
	}
	if preserve, _, _ := unstructured.NestedBool(crd.Object, "spec", "preserveUnknownFields"); preserve {
		return kept(name, gvk.Version, t)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if v["name"] != gvk.Version {
			continue
		}
		s, found, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema")
		if !found {
			return kept(name, gvk.Version, t) // no schema: nothing pruned
		}
		if problem := fieldInSchema(s, t.rollPath()); problem != "" {
			return SchemaCheck{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPrunedBySchema,
				Message: fmt.Sprintf("CustomResourceDefinition %s (version %s) does not keep %s: %s; every rollout of a %s would be refused", name, gvk.Version, t.RollPath(), problem, gvk.Kind)}
		}
		return kept(name, gvk.Version, t)
	}
	return SchemaCheck{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonSchemaUnknown,
		Message: fmt.Sprintf("CustomResourceDefinition %s has no version %s", name, gvk.Version)}
}

func kept(crd, version string, t *Target) SchemaCheck {
	return SchemaCheck{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInSchema,
		Message: fmt.Sprintf("CustomResourceDefinition %s (version %s) keeps %s", crd, version, t.RollPath())}
}

// fieldInSchema walks a structural schema (openAPIV3Schema) along path and
// returns "" when the API server keeps a string written there, else why not:
// a field that is neither a declared property nor under
// x-kubernetes-preserve-unknown-fields or additionalProperties is pruned, and
// a field of another type than string is refused.
func fieldInSchema(s map[string]any, path []string) string {
	if len(path) > 0 && path[0] == "metadata" {
		return "" // the object's metadata is kept whatever the schema says
	}
	node := s
	for i, seg := range path {
		if props, _ := node["properties"].(map[string]any); props != nil {
			if next, ok := props[seg].(map[string]any); ok {
				node = next
				continue
			}
		}
		if preserve, _ := node["x-kubernetes-preserve-unknown-fields"].(bool); preserve {
			return ""
		}
		switch ap := node["additionalProperties"].(type) {
		case map[string]any:
			node = ap
			continue
		case bool:
			if ap {
				return ""
			}
		}
		return fmt.Sprintf("the schema has no field %s (nor preserves unknown fields there), so it is pruned", strings.Join(path[:i+1], "."))
	}
	if typ, _ := node["type"].(string); typ != "" && typ != "string" {
		if intOrString, _ := node["x-kubernetes-int-or-string"].(bool); !intOrString {
			return fmt.Sprintf("the field is of type %s, not a string", typ)
		}
	}
	return ""
}
