package census

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/drive"
)

// AnnotationRotationRestart is the pod-template annotation a driven
// rotation stamps to roll a workload whose pods read at start: its value,
// "<rotation>/<step>", is written once per step, so a roll is never
// repeated, and never fights the rollout controller's own stamp.
const AnnotationRotationRestart = "hotcert.dev/rotation-restart"

// EventRolled (Normal) and EventNotRolled (Warning) say that a driven
// rotation rolled a workload, or why it did not.
const (
	EventRolled    = "DriveRolled"
	EventNotRolled = "DriveNotRolled"
)

// roll rolls the workload of pod (namespace/name) for step of rotation, as
// the rollout controller would: only a workload opted in
// (hotcert.dev/rollout-on-change), never one in dry run
// (hotcert.dev/dry-run, reported instead), not before its minimum interval
// (hotcert.dev/min-interval since hotcert.dev/last-rollout), recording
// hotcert.dev/last-rollout. It returns the Event to record (ok false: none).
func (c *Census) roll(ctx context.Context, rotation, step, pod string, now time.Time) (drive.Event, bool) {
	ns, name, _ := strings.Cut(pod, "/")
	w, err := c.workloadOf(ctx, ns, name)
	if err != nil || w == nil {
		why := "it has no Deployment, StatefulSet or DaemonSet to roll: restart it, or acknowledge it"
		if err != nil {
			why = err.Error()
		}
		return drive.Event{Warning: true, Reason: EventNotRolled, Message: fmt.Sprintf("%s: pod %s reads at start: %s", step, pod, why)}, true
	}
	what := fmt.Sprintf("%s %s/%s", kindOf(w), w.GetNamespace(), w.GetName())
	ann := w.GetAnnotations()
	tmpl := rollout.PodTemplate(w)
	stamp := rotation + "/" + step
	if tmpl.Annotations[AnnotationRotationRestart] == stamp {
		return drive.Event{}, false // rolled for this step already
	}
	if ann[rollout.AnnotationRolloutOnChange] != "true" {
		return drive.Event{Warning: true, Reason: EventNotRolled, Message: fmt.Sprintf("%s: %s (pod %s reads at start) is not opted in (%s: \"true\"): restart it, or acknowledge it", step, what, pod, rollout.AnnotationRolloutOnChange)}, true
	}
	if ann[rollout.AnnotationDryRun] == "true" {
		return drive.Event{Reason: EventNotRolled, Message: fmt.Sprintf("%s: dry run: would roll %s (pod %s reads at start)", step, what, pod)}, true
	}
	if last, err := time.Parse(time.RFC3339, ann[rollout.AnnotationLastRollout]); err == nil {
		if iv, err := time.ParseDuration(ann[rollout.AnnotationMinInterval]); err == nil && now.Before(last.Add(iv)) {
			return drive.Event{}, false // its minimum interval: the next census tries again
		}
	}
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[AnnotationRotationRestart] = stamp
	ann[rollout.AnnotationLastRollout] = now.UTC().Format(time.RFC3339)
	w.SetAnnotations(ann)
	if err := c.client.Update(ctx, w, client.FieldOwner(FieldManager)); err != nil {
		return drive.Event{Warning: true, Reason: EventNotRolled, Message: fmt.Sprintf("%s: rolling %s: %v", step, what, err)}, true
	}
	return drive.Event{Reason: EventRolled, Message: fmt.Sprintf("%s: rolled %s: pod %s reads at start and is not proven to hold what %s wrote", step, what, pod, step)}, true
}

// workloadOf returns the Deployment, StatefulSet or DaemonSet controlling
// the pod (nil: none), read from the API server.
func (c *Census) workloadOf(ctx context.Context, ns, name string) (client.Object, error) {
	pod := &corev1.Pod{}
	if err := c.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return nil, nil
	}
	var w client.Object
	switch owner.Kind {
	case "ReplicaSet":
		rs := &appsv1.ReplicaSet{}
		if err := c.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.Name}, rs); err != nil {
			return nil, fmt.Errorf("reading ReplicaSet %s/%s: %w", ns, owner.Name, err)
		}
		if owner = metav1.GetControllerOf(rs); owner == nil || owner.Kind != "Deployment" {
			return nil, nil
		}
		w = &appsv1.Deployment{}
	case "StatefulSet":
		w = &appsv1.StatefulSet{}
	case "DaemonSet":
		w = &appsv1.DaemonSet{}
	default:
		return nil, nil
	}
	if err := c.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.Name}, w); err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", owner.Kind, ns, owner.Name, err)
	}
	return w, nil
}

func kindOf(w client.Object) string {
	switch w.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *appsv1.StatefulSet:
		return "StatefulSet"
	}
	return "DaemonSet"
}
