package referencerules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// Graph is a compiled set of ReferenceRules: for each kind, what it names and
// what runs it.
type Graph struct {
	kinds   map[schema.GroupKind]*kindNode
	gvks    []schema.GroupVersionKind
	targets map[string]*Target // declared workload kinds, by kind name
}

type kindNode struct {
	gvk     schema.GroupVersionKind
	data    []dataRef
	names   []nameRef // fields of this kind naming objects of other kinds
	work    *workloads
	named   bool // some other kind names objects of this kind
	fromRul string
}

type dataRef struct {
	kind     rollout.Kind
	name     field
	key      *field
	optional bool
}

// nameRef is a field of a referring kind naming an object of kind target.
type nameRef struct {
	target     schema.GroupKind
	name       field
	namespaced bool
}

type workloads struct {
	kinds    []string
	owner    bool
	selector map[string]string
	name     string
}

// WorkloadKinds are the built-in kinds of workloads a rule can name; a rule
// can also name a kind that a rule declares a rollout target.
var WorkloadKinds = []string{"Deployment", "StatefulSet", "DaemonSet"}

// Compile checks and compiles rules. Two rules for one kind are an error, and
// so is a workload kind that is neither built in nor declared by one of rules.
func Compile(rules []v1alpha1.ReferenceRule) (*Graph, error) {
	declared := declaredKinds(rules)
	return compile(rules, func(k string) bool { return declared[k] })
}

// declaredKinds returns the names of the kinds rules declare rollout
// targets.
func declaredKinds(rules []v1alpha1.ReferenceRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		if r.Spec.Rollout != nil {
			out[r.Spec.Target.Kind] = true
		}
	}
	return out
}

// compile is Compile with the workload kinds declared by rules in use beside
// these (a rule compiled alone may name a kind another rule declares).
func compile(rules []v1alpha1.ReferenceRule, declared func(kind string) bool) (*Graph, error) {
	g := &Graph{kinds: map[schema.GroupKind]*kindNode{}, targets: map[string]*Target{}}
	node := func(t v1alpha1.GroupVersionKind) *kindNode {
		gvk := t.GVK()
		n := g.kinds[gvk.GroupKind()]
		if n == nil {
			n = &kindNode{gvk: gvk}
			g.kinds[gvk.GroupKind()] = n
			g.gvks = append(g.gvks, gvk)
		}
		return n
	}
	compileField := func(r string, f v1alpha1.FieldRef) (field, error) {
		p, err := parsePath(f.Path)
		if err != nil {
			return field{}, fmt.Errorf("rule %s: %w", r, err)
		}
		if len(p) == 0 && f.Default == "" {
			return field{}, fmt.Errorf("rule %s: a field needs a path, a default, or both", r)
		}
		return field{path: p, def: f.Default}, nil
	}
	for _, rule := range rules {
		s := rule.Spec
		if s.Target.Kind == "" || s.Target.Version == "" {
			return nil, fmt.Errorf("referencerules: rule %s: target needs a version and a kind", rule.Name)
		}
		n := node(s.Target)
		if n.fromRul != "" {
			return nil, fmt.Errorf("referencerules: rules %s and %s are both about %s", n.fromRul, rule.Name, n.gvk.GroupKind())
		}
		n.fromRul = rule.Name
		n.gvk = s.Target.GVK()
		for kind, refs := range map[rollout.Kind][]v1alpha1.DataRef{rollout.KindSecret: s.SecretRefs, rollout.KindConfigMap: s.ConfigMapRefs} {
			for _, d := range refs {
				name, err := compileField(rule.Name, d.Name)
				if err != nil {
					return nil, fmt.Errorf("referencerules: %w", err)
				}
				ref := dataRef{kind: kind, name: name, optional: d.Optional}
				if d.Key != nil {
					k, err := compileField(rule.Name, *d.Key)
					if err != nil {
						return nil, fmt.Errorf("referencerules: %w", err)
					}
					ref.key = &k
				}
				n.data = append(n.data, ref)
			}
		}
		for _, by := range s.ReferencedBy {
			name, err := compileField(rule.Name, by.Name)
			if err != nil {
				return nil, fmt.Errorf("referencerules: %w", err)
			}
			if by.Target.GVK().GroupKind() == n.gvk.GroupKind() {
				return nil, fmt.Errorf("referencerules: rule %s: referencedBy names the target itself", rule.Name)
			}
			from := node(by.Target)
			from.names = append(from.names, nameRef{target: n.gvk.GroupKind(), name: name, namespaced: by.Format == v1alpha1.FormatNamespacedName})
			n.named = true
		}
		if w := s.Workloads; w != nil {
			set := 0
			for _, b := range []bool{w.OwnerReferences != nil, len(w.Selector) > 0, w.Name != ""} {
				if b {
					set++
				}
			}
			if set != 1 {
				return nil, fmt.Errorf("referencerules: rule %s: workloads needs exactly one of ownerReferences, selector or name", rule.Name)
			}
			kinds := w.Kinds
			if len(kinds) == 0 {
				kinds = WorkloadKinds
			}
			for _, k := range kinds {
				if !slices.Contains(WorkloadKinds, k) && !declared(k) {
					return nil, fmt.Errorf("referencerules: rule %s: workload kind %s is not one of %s, nor declared by a rule's rollout", rule.Name, k, strings.Join(WorkloadKinds, ", "))
				}
			}
			n.work = &workloads{kinds: kinds, owner: w.OwnerReferences != nil, selector: w.Selector, name: w.Name}
		}
		if s.Rollout != nil {
			t, err := compileTarget(rule.Name, n.gvk, s.Rollout)
			if err != nil {
				return nil, err
			}
			if o := g.targets[t.GVK.Kind]; o != nil {
				return nil, fmt.Errorf("referencerules: rules %s and %s both declare a workload kind named %s (%s, %s): workload kinds are told apart by name", o.Rule, rule.Name, t.GVK.Kind, o.GVK.GroupKind(), t.GVK.GroupKind())
			}
			g.targets[t.GVK.Kind] = t
		}
	}
	return g, nil
}

// Targets returns the workload kinds the rules declare, by kind name.
func (g *Graph) Targets() []*Target {
	out := make([]*Target, 0, len(g.targets))
	for _, name := range slices.Sorted(maps.Keys(g.targets)) {
		out = append(out, g.targets[name])
	}
	return out
}

// Kinds returns the kinds the graph names, targets and referrers, in the order
// the rules name them.
func (g *Graph) Kinds() []schema.GroupVersionKind { return slices.Clone(g.gvks) }

// expand replaces "{name}" with the object's name.
func expand(tmpl, name string) string { return strings.ReplaceAll(tmpl, "{name}", name) }

// anyKind declares every workload kind: for compiling a rule alone to learn
// which kinds it names.
func anyKind(string) bool { return true }
