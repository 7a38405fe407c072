package referencerules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/internal/progress"
)

// Target is a workload kind a ReferenceRule declares (spec.rollout): where
// its pod template is, how it is rolled and when its latest rollout is done.
// It is immutable; a rule changed is a new Target.
type Target struct {
	// GVK is the kind, at the version the rule names.
	GVK schema.GroupVersionKind
	// Rule is the ReferenceRule that declares it.
	Rule      string
	template  []string
	restartAt []string
	ready     *progress.Readiness
}

// compileTarget compiles the spec.rollout of rule.
func compileTarget(rule string, gvk schema.GroupVersionKind, t *v1alpha1.RolloutTarget) (*Target, error) {
	if slices.Contains(WorkloadKinds, gvk.Kind) {
		return nil, fmt.Errorf("referencerules: rule %s: %s is a built-in workload kind; rollout declares kinds of other names", rule, gvk.Kind)
	}
	out := &Target{GVK: gvk, Rule: rule}
	var err error
	if out.template, err = singlePath(t.PodTemplate); err != nil || len(out.template) == 0 {
		return nil, fmt.Errorf("referencerules: rule %s: rollout.podTemplate %q: want a path such as spec.template", rule, t.PodTemplate)
	}
	if out.restartAt, err = singlePath(t.RestartAt); err != nil {
		return nil, fmt.Errorf("referencerules: rule %s: rollout.restartAt: %w", rule, err)
	}
	if t.Ready != "" {
		if out.ready, err = progress.CompileReadiness(t.Ready); err != nil {
			return nil, fmt.Errorf("referencerules: rule %s: rollout.ready: %w", rule, err)
		}
	}
	return out, nil
}

// singlePath parses a path that names one field (no []).
func singlePath(p string) ([]string, error) {
	segs, err := parsePath(p)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(segs))
	for _, s := range segs {
		if s.each {
			return nil, fmt.Errorf("path %q names every element of a list: a rollout path names one field", p)
		}
		out = append(out, s.field)
	}
	return out, nil
}

// PodTemplate returns the pod template of obj, decoded; an error says that
// the path is absent or holds no pod template (nothing is rolled then).
func (t *Target) PodTemplate(obj map[string]any) (*corev1.PodTemplateSpec, error) {
	m, found, err := unstructured.NestedMap(obj, t.template...)
	if err != nil || !found {
		return nil, fmt.Errorf("%s has no pod template at %s (rule %s)", t.GVK.Kind, strings.Join(t.template, "."), t.Rule)
	}
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tmpl); err != nil {
		return nil, fmt.Errorf("%s's %s is not a pod template (rule %s): %w", t.GVK.Kind, strings.Join(t.template, "."), t.Rule, err)
	}
	if len(tmpl.Spec.Containers) == 0 {
		// Every pod template has a container: a path that names something
		// else ("spec" for "spec.template") must not read as "consumes
		// nothing".
		return nil, fmt.Errorf("%s's %s is not a pod template, it has no spec.containers (rule %s)", t.GVK.Kind, strings.Join(t.template, "."), t.Rule)
	}
	return &tmpl, nil
}

// Roll changes obj so that its controller rolls it: it stamps hash into the
// pod template's annotations ([rollout.AnnotationConfigHash]), or, with a
// restartAt path, sets that field to now (RFC 3339, in UTC). Call it only to
// roll, after PodTemplate succeeded.
func (t *Target) Roll(obj map[string]any, hash string, now time.Time) error {
	if len(t.restartAt) > 0 {
		return unstructured.SetNestedField(obj, now.UTC().Format(time.RFC3339), t.restartAt...)
	}
	path := slices.Concat(t.template, []string{"metadata", "annotations", rollout.AnnotationConfigHash})
	return unstructured.SetNestedField(obj, hash, path...)
}

// Progress judges obj's latest rollout with the rule's readiness
// expression; without one, it is done.
func (t *Target) Progress(obj map[string]any) progress.Progress {
	if t.ready == nil {
		return progress.Progress{Done: true}
	}
	return t.ready.Of(obj)
}
