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
	for _, rule := range rules {
		if err := g.add(rule, declared); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// add compiles one rule into g: the node of its target, the Secrets and
// ConfigMaps it names, the kinds referring to it, its workloads and its
// rollout target.
func (g *Graph) add(rule v1alpha1.ReferenceRule, declared func(kind string) bool) error {
	s := rule.Spec
	n, err := g.targetNode(rule)
	if err != nil {
		return err
	}
	if err := n.addData(rule); err != nil {
		return err
	}
	if err := g.addReferrers(rule, n); err != nil {
		return err
	}
	if s.Workloads != nil {
		if n.work, err = compileWorkloads(rule.Name, s.Workloads, declared); err != nil {
			return err
		}
	}
	if s.Rollout != nil {
		return g.addRollout(rule.Name, n, s.Rollout)
	}
	return nil
}

// node returns the node of kind t, adding it (in the order the rules name
// kinds) if it is new.
func (g *Graph) node(t v1alpha1.GroupVersionKind) *kindNode {
	gvk := t.GVK()
	n := g.kinds[gvk.GroupKind()]
	if n == nil {
		n = &kindNode{gvk: gvk}
		g.kinds[gvk.GroupKind()] = n
		g.gvks = append(g.gvks, gvk)
	}
	return n
}

// targetNode returns the node of rule's target, which no other rule may be about.
func (g *Graph) targetNode(rule v1alpha1.ReferenceRule) (*kindNode, error) {
	t := rule.Spec.Target
	if t.Kind == "" || t.Version == "" {
		return nil, fmt.Errorf("referencerules: rule %s: target needs a version and a kind", rule.Name)
	}
	n := g.node(t)
	if n.fromRul != "" {
		return nil, fmt.Errorf("referencerules: rules %s and %s are both about %s", n.fromRul, rule.Name, n.gvk.GroupKind())
	}
	n.fromRul = rule.Name
	n.gvk = t.GVK()
	return n, nil
}

// addData adds the Secrets and ConfigMaps rule names to its target n.
func (n *kindNode) addData(rule v1alpha1.ReferenceRule) error {
	s := rule.Spec
	for kind, refs := range map[rollout.Kind][]v1alpha1.DataRef{rollout.KindSecret: s.SecretRefs, rollout.KindConfigMap: s.ConfigMapRefs} {
		for _, d := range refs {
			name, err := compileField(rule.Name, d.Name)
			if err != nil {
				return fmt.Errorf("referencerules: %w", err)
			}
			ref := dataRef{kind: kind, name: name, optional: d.Optional}
			if d.Key != nil {
				k, err := compileField(rule.Name, *d.Key)
				if err != nil {
					return fmt.Errorf("referencerules: %w", err)
				}
				ref.key = &k
			}
			n.data = append(n.data, ref)
		}
	}
	return nil
}

// addReferrers adds to the kinds referring to rule's target n the fields
// naming it.
func (g *Graph) addReferrers(rule v1alpha1.ReferenceRule, n *kindNode) error {
	for _, by := range rule.Spec.ReferencedBy {
		name, err := compileField(rule.Name, by.Name)
		if err != nil {
			return fmt.Errorf("referencerules: %w", err)
		}
		if by.Target.GVK().GroupKind() == n.gvk.GroupKind() {
			return fmt.Errorf("referencerules: rule %s: referencedBy names the target itself", rule.Name)
		}
		from := g.node(by.Target)
		from.names = append(from.names, nameRef{target: n.gvk.GroupKind(), name: name, namespaced: by.Format == v1alpha1.FormatNamespacedName})
		n.named = true
	}
	return nil
}

// compileWorkloads checks and compiles rule's workloads w, whose kinds must be
// built in or declared.
func compileWorkloads(rule string, w *v1alpha1.WorkloadRule, declared func(kind string) bool) (*workloads, error) {
	set := 0
	for _, b := range []bool{w.OwnerReferences != nil, len(w.Selector) > 0, w.Name != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("referencerules: rule %s: workloads needs exactly one of ownerReferences, selector or name", rule)
	}
	kinds := w.Kinds
	if len(kinds) == 0 {
		kinds = WorkloadKinds
	}
	for _, k := range kinds {
		if !slices.Contains(WorkloadKinds, k) && !declared(k) {
			return nil, fmt.Errorf("referencerules: rule %s: workload kind %s is not one of %s, nor declared by a rule's rollout", rule, k, strings.Join(WorkloadKinds, ", "))
		}
	}
	return &workloads{kinds: kinds, owner: w.OwnerReferences != nil, selector: w.Selector, name: w.Name}, nil
}

// addRollout declares rule's target n a workload kind; kinds are told apart
// by name, so two of one name are an error.
func (g *Graph) addRollout(rule string, n *kindNode, r *v1alpha1.RolloutTarget) error {
	t, err := compileTarget(rule, n.gvk, r)
	if err != nil {
		return err
	}
	if o := g.targets[t.GVK.Kind]; o != nil {
		return fmt.Errorf("referencerules: rules %s and %s both declare a workload kind named %s (%s, %s): workload kinds are told apart by name", o.Rule, rule, t.GVK.Kind, o.GVK.GroupKind(), t.GVK.GroupKind())
	}
	g.targets[t.GVK.Kind] = t
	return nil
}

// compileField compiles f, a field of rule.
func compileField(rule string, f v1alpha1.FieldRef) (field, error) {
	p, err := parsePath(f.Path)
	if err != nil {
		return field{}, fmt.Errorf("rule %s: %w", rule, err)
	}
	if len(p) == 0 && f.Default == "" {
		return field{}, fmt.Errorf("rule %s: a field needs a path, a default, or both", rule)
	}
	return field{path: p, def: f.Default}, nil
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
