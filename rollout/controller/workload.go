package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/progress"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// workloadKind is one kind of workload the controller rolls: a built-in one,
// or one a ReferenceRule declares (see targets.go).
type workloadKind struct {
	name    string // "Deployment"; the kind label of the metrics
	newObj  func() client.Object
	newList func() client.ObjectList
	// template returns the pod template of obj (the object's own for the
	// built-in kinds, a decoded copy for declared ones); an error says the
	// pod template is not where the kind's rule says.
	template func(obj client.Object) (*corev1.PodTemplateSpec, error)
	// roll makes the change to obj that rolls it (stamp the hash, or set a
	// restart time).
	roll func(obj client.Object, hash string, now time.Time) error
	// held, for a declared kind (nil for the built-in ones), checks the
	// write of roll's change: writeErr is the API server's answer, obj the
	// object it returned. A *referencerules.NotKeptError says the field
	// written was not kept (pruned by the kind's schema), so nothing rolled.
	held func(obj client.Object, hash string, now time.Time, writeErr error) error
	// progress judges obj's latest rollout.
	progress func(obj client.Object) progress.Progress
	// stripped reports whether obj is cached without its spec: workloads that
	// are not managed are (see clusterview.View.CacheOptions), so one
	// a ReferenceRule reaches, not adopted yet, is read again.
	stripped func(obj client.Object) bool
	// declared, for a kind a ReferenceRule declares, reports whether a rule
	// in use still does (nil for the built-in kinds).
	declared func() bool
}

var workloadKinds = []workloadKind{
	builtinKind("Deployment", func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }),
	builtinKind("StatefulSet", func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} }),
	builtinKind("DaemonSet", func() client.Object { return &appsv1.DaemonSet{} }, func() client.ObjectList { return &appsv1.DaemonSetList{} }),
}

func builtinKind(name string, newObj func() client.Object, newList func() client.ObjectList) workloadKind {
	return workloadKind{
		name: name, newObj: newObj, newList: newList,
		template: func(obj client.Object) (*corev1.PodTemplateSpec, error) { return rollout.PodTemplate(obj), nil },
		roll: func(obj client.Object, hash string, _ time.Time) error {
			rollout.Stamp(rollout.PodTemplate(obj), hash)
			return nil
		},
		progress: progress.Of,
		stripped: func(obj client.Object) bool { return len(rollout.PodTemplate(obj).Spec.Containers) == 0 },
	}
}

// optedIn reports whether obj asks to be rolled.
func optedIn(obj client.Object) bool {
	return state.IsTrue(obj.GetAnnotations(), rollout.AnnotationRolloutOnChange)
}

// hasState reports whether obj carries state the controller recorded.
func hasState(obj client.Object) bool {
	a := obj.GetAnnotations()
	for _, k := range stateKeys {
		if _, ok := a[k]; ok {
			return true
		}
	}
	return false
}

var stateKeys = []string{rollout.AnnotationAppliedHash, rollout.AnnotationAppliedKeys, rollout.AnnotationLastRollout}

// scheduleKeys are the state annotations written only when they apply: the
// running leaf's validity (a workload consuming one), the last rotate-now
// token honoured, a change waiting for a rollout window. An opt-out removes
// them with stateKeys.
var scheduleKeys = []string{rollout.AnnotationRunningValidity, rollout.AnnotationRotated, rollout.AnnotationRolloutPending}

// refsOf returns what the pod spec of a managed workload of kind k consumes
// (opted in, or adopted through a ReferenceRule), nil for any other.
func (k workloadKind) refsOf(obj client.Object) rollout.Refs {
	if !(optedIn(obj) || hasState(obj)) || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	tmpl, err := k.template(obj)
	if tmpl == nil || err != nil {
		return nil
	}
	return rollout.PodSpecRefs(&tmpl.Spec)
}

// workloadKey names a workload in in-memory maps.
func workloadKey(kind string, obj client.Object) string {
	return kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
}
