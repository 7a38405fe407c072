package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// workloadKind is one kind of workload the controller rolls.
type workloadKind struct {
	name    string // "Deployment"
	newObj  func() client.Object
	newList func() client.ObjectList
}

var workloadKinds = []workloadKind{
	{"Deployment", func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }},
	{"StatefulSet", func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} }},
	{"DaemonSet", func() client.Object { return &appsv1.DaemonSet{} }, func() client.ObjectList { return &appsv1.DaemonSetList{} }},
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

// refsOf returns what the pod spec of a managed workload consumes (opted in,
// or adopted through a ReferenceRule), nil for any other.
func refsOf(obj client.Object) rollout.Refs {
	if !(optedIn(obj) || hasState(obj)) || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	tmpl := rollout.PodTemplate(obj)
	if tmpl == nil {
		return nil
	}
	return rollout.PodSpecRefs(&tmpl.Spec)
}

// workloadKey names a workload in in-memory maps.
func workloadKey(kind string, obj client.Object) string {
	return kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
}
