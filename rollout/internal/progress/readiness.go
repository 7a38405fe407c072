package progress

import (
	"fmt"

	"github.com/google/cel-go/cel"
)

// readinessCostLimit bounds the work of one evaluation of a readiness
// expression (CEL's cost units; Kubernetes allows 10^6 per CRD validation
// rule): a rule cannot stall the controller with an expensive one.
const readinessCostLimit = 1_000_000

// Readiness is a compiled readiness expression of a workload kind declared
// through a ReferenceRule: a CEL expression over the object (self, as JSON:
// maps, lists, strings, numbers, booleans) that is true when its latest
// rollout is done. CEL is the language Kubernetes uses for CRD validation
// rules and ValidatingAdmissionPolicy, so `has(self.status.phase) &&
// self.status.phase == 'Healthy'` reads as it does there.
type Readiness struct {
	expr string
	prg  cel.Program
}

// CompileReadiness compiles expr, which must yield a bool.
func CompileReadiness(expr string) (*Readiness, error) {
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType))
	if err != nil {
		return nil, fmt.Errorf("progress: readiness expression: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("progress: readiness expression %q: %w", expr, iss.Err())
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("progress: readiness expression %q yields %s, want bool", expr, t)
	}
	prg, err := env.Program(ast, cel.CostLimit(readinessCostLimit))
	if err != nil {
		return nil, fmt.Errorf("progress: readiness expression %q: %w", expr, err)
	}
	return &Readiness{expr: expr, prg: prg}, nil
}

// String returns the expression.
func (r *Readiness) String() string { return r.expr }

// Of judges obj (an object as unstructured JSON). An expression that is false,
// fails (a field it reads is absent) or yields no bool is not done: the
// change waits, at most the controller's rollout wait timeout, and the Detail
// says why.
func (r *Readiness) Of(obj map[string]any) Progress {
	out, _, err := r.prg.Eval(map[string]any{"self": obj})
	if err != nil {
		return waiting("the readiness expression %s fails: %v", r.expr, err)
	}
	done, ok := out.Value().(bool)
	switch {
	case !ok:
		return waiting("the readiness expression %s yields %v, not a bool", r.expr, out.Value())
	case !done:
		return waiting("the readiness expression %s is false", r.expr)
	}
	return Progress{Done: true}
}
