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

// Held checks obj, the object as the API server returned it after the write
// of Roll's change, for that change: the restartAt field holds now, or the pod
// template the hash. An error says which field does not hold it: the API
// server dropped it (a field the kind's schema does not have is pruned), and
// nothing was rolled.
func (t *Target) Held(obj map[string]any, hash string, now time.Time) error {
	want := hash
	if len(t.restartAt) > 0 {
		want = now.UTC().Format(time.RFC3339)
	}
	got, found, err := unstructured.NestedFieldNoCopy(obj, t.rollPath()...)
	if err == nil && found && got == want {
		return nil
	}
	return &NotKeptError{Kind: t.GVK.Kind, Path: t.RollPath(), Rule: t.Rule}
}

// NotKeptError: the API server did not keep the field a rollout of a declared
// kind writes (its schema prunes it, or a webhook removed it), so the write
// rolled nothing.
type NotKeptError struct {
	Kind, Path, Rule string
	// Err is the API server's refusal of the write, nil when it accepted the
	// write and dropped the field.
	Err error
}

func (e *NotKeptError) Error() string {
	msg := fmt.Sprintf("the API server does not keep %s's %s (rule %s): the kind's schema has no such field, so a write of it is pruned", e.Kind, e.Path, e.Rule)
	if e.Err != nil {
		// The API server's message repeats the whole patch first: keep what
		// it says of the field.
		cause := e.Err.Error()
		if i := strings.Index(cause, "strict decoding error"); i >= 0 {
			cause = cause[i:]
		}
		return msg + "; the API server refused the write: " + cause
	}
	return msg + "; it was written but does not hold the value"
}

func (e *NotKeptError) Unwrap() error { return e.Err }

// RollPath returns the dot-separated path of the field Roll writes: the
// restartAt path, or the pod template's config-hash annotation.
func (t *Target) RollPath() string { return strings.Join(t.rollPath(), ".") }

func (t *Target) rollPath() []string {
	if len(t.restartAt) > 0 {
		return t.restartAt
	}
	return slices.Concat(t.template, []string{"metadata", "annotations", rollout.AnnotationConfigHash})
}

// Progress judges obj's latest rollout with the rule's readiness
// expression; without one, it is done.
func (t *Target) Progress(obj map[string]any) progress.Progress {
	if t.ready == nil {
		return progress.Progress{Done: true}
	}
	return t.ready.Of(obj)
}
