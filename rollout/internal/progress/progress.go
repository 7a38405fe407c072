// Package progress judges whether a workload's latest rollout is done, as
// `kubectl rollout status` does.
package progress

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Progress is the state of a workload's latest rollout, judged as `kubectl
// rollout status` does.
type Progress struct {
	// Done is true when the latest pod template is fully rolled out, when the
	// workload is paused or uses the OnDelete strategy (nothing more will happen
	// by itself), or when the rollout failed (see Failed).
	Done bool
	// Failed is true when a Deployment exceeded its progress deadline: a new
	// rollout may be what fixes it, so it does not block one.
	Failed bool
	// Detail says what is still in progress, for messages.
	Detail string
}

// Of returns the rollout progress of a Deployment, StatefulSet or
// DaemonSet; any other object is reported done.
func Of(obj client.Object) Progress {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return Deployment(o)
	case *appsv1.StatefulSet:
		return StatefulSet(o)
	case *appsv1.DaemonSet:
		return DaemonSet(o)
	}
	return Progress{Done: true}
}

func waiting(format string, args ...any) Progress {
	return Progress{Detail: fmt.Sprintf(format, args...)}
}

// Deployment judges a Deployment's rollout.
func Deployment(d *appsv1.Deployment) Progress {
	if d.Spec.Paused {
		return Progress{Done: true, Detail: "paused"}
	}
	if d.Status.ObservedGeneration < d.Generation {
		return waiting("the deployment controller has not yet observed generation %d", d.Generation)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return Progress{Done: true, Failed: true, Detail: "the previous rollout exceeded its progress deadline"}
		}
	}
	want := replicas(d.Spec.Replicas)
	s := d.Status
	switch {
	case s.UpdatedReplicas < want:
		return waiting("%d of %d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return waiting("%d old replicas pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return waiting("%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas)
	}
	return Progress{Done: true}
}

// StatefulSet judges a StatefulSet's rollout.
func StatefulSet(s *appsv1.StatefulSet) Progress {
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return Progress{Done: true, Detail: "OnDelete update strategy"}
	}
	if s.Status.ObservedGeneration < s.Generation {
		return waiting("the statefulset controller has not yet observed generation %d", s.Generation)
	}
	want := replicas(s.Spec.Replicas)
	if s.Status.ReadyReplicas < want {
		return waiting("%d of %d replicas ready", s.Status.ReadyReplicas, want)
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		if part := want - *ru.Partition; s.Status.UpdatedReplicas < part {
			return waiting("%d of %d replicas updated", s.Status.UpdatedReplicas, part)
		}
		return Progress{Done: true}
	}
	if s.Status.UpdateRevision != s.Status.CurrentRevision {
		return waiting("%d of %d replicas updated", s.Status.UpdatedReplicas, want)
	}
	return Progress{Done: true}
}

// DaemonSet judges a DaemonSet's rollout.
func DaemonSet(d *appsv1.DaemonSet) Progress {
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return Progress{Done: true, Detail: "OnDelete update strategy"}
	}
	if d.Status.ObservedGeneration < d.Generation {
		return waiting("the daemonset controller has not yet observed generation %d", d.Generation)
	}
	s := d.Status
	switch {
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return waiting("%d of %d pods updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	case s.NumberAvailable < s.DesiredNumberScheduled:
		return waiting("%d of %d pods available", s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return Progress{Done: true}
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
