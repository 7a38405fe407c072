package progress_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/rollout/internal/progress"
)

func TestProgress(t *testing.T) {
	dep := func(mut func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}}
		mut(d)
		return d
	}
	sts := func(mut func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 2, UpdatedReplicas: 2, CurrentRevision: "r2", UpdateRevision: "r2"}}
		mut(s)
		return s
	}
	ds := func(mut func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 4}}
		mut(d)
		return d
	}
	cases := []struct {
		name         string
		p            progress.Progress
		done, failed bool
	}{
		{"deployment done", progress.Of(dep(func(*appsv1.Deployment) {})), true, false},
		{"deployment unobserved", progress.Of(dep(func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 1 })), false, false},
		{"deployment updating", progress.Of(dep(func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 })), false, false},
		{"deployment old replicas", progress.Of(dep(func(d *appsv1.Deployment) { d.Status.Replicas = 4 })), false, false},
		{"deployment unavailable", progress.Of(dep(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 2 })), false, false},
		{"deployment paused", progress.Of(dep(func(d *appsv1.Deployment) { d.Spec.Paused = true; d.Status.UpdatedReplicas = 0 })), true, false},
		{"deployment deadline exceeded", progress.Of(dep(func(d *appsv1.Deployment) {
			d.Status.UpdatedReplicas = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded"}}
		})), true, true},
		{"statefulset done", progress.Of(sts(func(*appsv1.StatefulSet) {})), true, false},
		{"statefulset revision pending", progress.Of(sts(func(s *appsv1.StatefulSet) { s.Status.UpdateRevision = "r3" })), false, false},
		{"statefulset not ready", progress.Of(sts(func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas = 1 })), false, false},
		{"statefulset partition", progress.Of(sts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
			s.Status.UpdateRevision, s.Status.UpdatedReplicas = "r3", 1
		})), true, false},
		{"statefulset OnDelete", progress.Of(sts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
			s.Status.ObservedGeneration = 0
		})), true, false},
		{"daemonset done", progress.Of(ds(func(*appsv1.DaemonSet) {})), true, false},
		{"daemonset updating", progress.Of(ds(func(d *appsv1.DaemonSet) { d.Status.UpdatedNumberScheduled = 1 })), false, false},
		{"daemonset unavailable", progress.Of(ds(func(d *appsv1.DaemonSet) { d.Status.NumberAvailable = 1 })), false, false},
	}
	for _, tc := range cases {
		if tc.p.Done != tc.done || tc.p.Failed != tc.failed {
			t.Errorf("%s: %+v, want done=%v failed=%v", tc.name, tc.p, tc.done, tc.failed)
		}
		if !tc.p.Done && tc.p.Detail == "" {
			t.Errorf("%s: no detail", tc.name)
		}
	}
}
