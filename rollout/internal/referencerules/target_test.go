package referencerules

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

func targetRule(name string, gvk v1alpha1.GroupVersionKind, t v1alpha1.RolloutTarget) v1alpha1.ReferenceRule {
	return v1alpha1.ReferenceRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ReferenceRuleSpec{Target: gvk, Rollout: &t}}
}

var (
	argoKind     = v1alpha1.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}
	otherRollout = v1alpha1.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Rollout"}
	gatewayKind  = v1alpha1.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Gateway"}
)

func TestCompileRolloutTargets(t *testing.T) {
	ok := targetRule("argo", argoKind, v1alpha1.RolloutTarget{PodTemplate: "spec.template", RestartAt: "spec.restartAt", Ready: "self.status.phase == 'Healthy'"})
	uses := v1alpha1.ReferenceRule{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: v1alpha1.ReferenceRuleSpec{
		Target: gatewayKind, Workloads: &v1alpha1.WorkloadRule{Kinds: []string{"Rollout"}, Name: "{name}"},
	}}
	g, err := Compile([]v1alpha1.ReferenceRule{ok, uses})
	if err != nil {
		t.Fatal(err)
	}
	if ts := g.Targets(); len(ts) != 1 || ts[0].GVK != argoKind.GVK() || ts[0].Rule != "argo" {
		t.Fatalf("targets %+v", ts)
	}
	cases := []struct {
		name  string
		rules []v1alpha1.ReferenceRule
		want  string
	}{
		{"undeclared workload kind", []v1alpha1.ReferenceRule{uses}, "workload kind Rollout is not one of Deployment, StatefulSet, DaemonSet, nor declared by a rule's rollout"},
		{"same kind name twice", []v1alpha1.ReferenceRule{ok, targetRule("other", otherRollout, v1alpha1.RolloutTarget{PodTemplate: "spec.template"})},
			"rules argo and other both declare a workload kind named Rollout"},
		{"built-in name", []v1alpha1.ReferenceRule{targetRule("d", v1alpha1.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Deployment"}, v1alpha1.RolloutTarget{PodTemplate: "spec.template"})},
			"Deployment is a built-in workload kind"},
		{"list path", []v1alpha1.ReferenceRule{targetRule("l", argoKind, v1alpha1.RolloutTarget{PodTemplate: "spec.template", RestartAt: "spec.restarts[]"})},
			"names every element of a list"},
		{"no template", []v1alpha1.ReferenceRule{targetRule("n", argoKind, v1alpha1.RolloutTarget{})}, "rollout.podTemplate"},
		{"bad expression", []v1alpha1.ReferenceRule{targetRule("e", argoKind, v1alpha1.RolloutTarget{PodTemplate: "spec.template", Ready: "self.status.phase =="})},
			"rule e: rollout.ready"},
	}
	for _, c := range cases {
		if _, err := Compile(c.rules); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// A rule naming a declared kind is set aside with the rule that declares it
// (here: for naming an unserved kind), never the whole graph.
func TestRulesOfASetAsideKindAreSetAside(t *testing.T) {
	bad := map[string]error{}
	uses := v1alpha1.ReferenceRule{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: v1alpha1.ReferenceRuleSpec{
		Target: gatewayKind, Workloads: &v1alpha1.WorkloadRule{Kinds: []string{"Rollout"}, Name: "{name}"},
	}}
	kept := withoutUndeclared([]v1alpha1.ReferenceRule{uses}, bad)
	if len(kept) != 0 || bad["gw"] == nil || !strings.Contains(bad["gw"].Error(), "workload kind Rollout is declared by no rule in use") {
		t.Fatalf("kept %v, bad %v", kept, bad)
	}
}

func TestTargetReadsAndRolls(t *testing.T) {
	g, err := Compile([]v1alpha1.ReferenceRule{targetRule("cj", v1alpha1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, v1alpha1.RolloutTarget{PodTemplate: "spec.jobTemplate.spec.template"})})
	if err != nil {
		t.Fatal(err)
	}
	tg := g.Targets()[0]
	obj := map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "db"}}}}}},
	}}}}}
	tmpl, err := tg.PodTemplate(obj)
	if err != nil || len(tmpl.Spec.Containers) != 1 || tmpl.Spec.Containers[0].EnvFrom[0].SecretRef.Name != "db" {
		t.Fatalf("%+v, %v", tmpl, err)
	}
	if err := tg.Roll(obj, "h1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if tmpl, _ := tg.PodTemplate(obj); tmpl.Annotations[rollout.AnnotationConfigHash] != "h1" {
		t.Fatalf("stamp: %v", tmpl.Annotations)
	}
	if p := tg.Progress(obj); !p.Done {
		t.Fatalf("a kind without an expression is not ready: %+v", p)
	}
	if _, err := tg.PodTemplate(map[string]any{"spec": map[string]any{}}); err == nil || !strings.Contains(err.Error(), "CronJob has no pod template at spec.jobTemplate.spec.template (rule cj)") {
		t.Fatalf("absent path: %v", err)
	}
	if _, err := tg.PodTemplate(map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": "nope"}}}}}); err == nil {
		t.Fatal("a string where the pod spec should be was decoded")
	}
	// The path names an object that is no pod template (the Job spec).
	wrong, err := Compile([]v1alpha1.ReferenceRule{targetRule("cj", v1alpha1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, v1alpha1.RolloutTarget{PodTemplate: "spec.jobTemplate.spec"})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Targets()[0].PodTemplate(obj); err == nil || !strings.Contains(err.Error(), "CronJob's spec.jobTemplate.spec is not a pod template, it has no spec.containers (rule cj)") {
		t.Fatalf("a path to the Job spec: %v", err)
	}
}

// Two rules declaring kinds of one name: the older is used, the other is set
// aside with its own error, and the rest stays in use.
func TestSortOutSetsAsideASecondKindOfOneName(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, g := range []v1alpha1.GroupVersionKind{argoKind, otherRollout, gatewayKind} {
		mapper.Add(g.GVK(), meta.RESTScopeNamespace)
	}
	l := &Live{mapper: mapper}
	first := targetRule("argo", argoKind, v1alpha1.RolloutTarget{PodTemplate: "spec.template"})
	second := targetRule("other", otherRollout, v1alpha1.RolloutTarget{PodTemplate: "spec.template"})
	second.CreationTimestamp = metav1.NewTime(time.Now())
	bad := map[string]error{}
	kept := l.sortOut([]v1alpha1.ReferenceRule{second, first}, bad)
	if len(kept) != 1 || kept[0].Name != "argo" {
		t.Fatalf("kept %v", kept)
	}
	if err := bad["other"]; err == nil || !strings.Contains(err.Error(), "rules argo and other both declare a workload kind named Rollout: argo, the older, is used") {
		t.Fatalf("other: %v", err)
	}
	if _, err := Compile(kept); err != nil {
		t.Fatal(err)
	}
}

// Held reads the object the API server returned: a field it dropped (a
// restartAt its schema prunes, an annotation a webhook removed) is a
// NotKeptError naming it, the value written is nil.
func TestTargetHeld(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	obj := func() map[string]any {
		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c"}}}}}}
	}
	for _, c := range []struct {
		name     string
		rollout  v1alpha1.RolloutTarget
		drop     func(map[string]any)
		wantPath string // "" held
	}{
		{"restartAt kept", v1alpha1.RolloutTarget{PodTemplate: "spec.template", RestartAt: "spec.restartAt"}, nil, ""},
		{"restartAt pruned", v1alpha1.RolloutTarget{PodTemplate: "spec.template", RestartAt: "spec.restartedAt"},
			func(o map[string]any) { delete(o["spec"].(map[string]any), "restartedAt") }, "spec.restartedAt"},
		{"stamp kept", v1alpha1.RolloutTarget{PodTemplate: "spec.template"}, nil, ""},
		{"stamp removed", v1alpha1.RolloutTarget{PodTemplate: "spec.template"},
			func(o map[string]any) { delete(o["spec"].(map[string]any)["template"].(map[string]any), "metadata") }, "spec.template.metadata.annotations." + rollout.AnnotationConfigHash},
	} {
		g, err := Compile([]v1alpha1.ReferenceRule{targetRule("r", argoKind, c.rollout)})
		if err != nil {
			t.Fatal(err)
		}
		tg := g.Targets()[0]
		o := obj()
		if err := tg.Roll(o, "h1", now); err != nil {
			t.Fatal(err)
		}
		if c.drop != nil {
			c.drop(o)
		}
		err = tg.Held(o, "h1", now)
		if c.wantPath == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var nk *NotKeptError
		if !errors.As(err, &nk) || nk.Path != c.wantPath || nk.Kind != "Rollout" || nk.Rule != "r" {
			t.Errorf("%s: %v, want a NotKeptError on %s", c.name, err, c.wantPath)
		}
		if o := obj(); tg.Roll(o, "h1", now) == nil && tg.Held(o, "h2", now.Add(time.Second)) == nil {
			t.Errorf("%s: another hash or time held", c.name)
		}
	}
}
