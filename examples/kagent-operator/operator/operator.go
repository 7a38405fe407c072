// Package operator is a minimal kagent-shaped operator built on hotcert's
// rollout package: it runs each Agent as a Deployment it owns, and rolls that
// Deployment exactly when a key the Agent consumes, through its ModelConfig,
// changes in a Secret.
//
// What it shows operator authors:
//
//   - field indexes (rollout.RefIndexer) of ModelConfigs by the Secrets they
//     name and of Agents by the ModelConfig they name, and a map function
//     (chain.MapThrough) from a Secret event to the Agents that consume it
//     through a ModelConfig: no listing of every object per event;
//   - Secrets watched as metadata only, and read by a direct GET of the few
//     an Agent consumes: no cluster-wide cache of every Secret's data;
//   - the hash of only the consumed keys (rollout.Compute over
//     rollout.PodSpecRefs of the pod template the operator builds), stamped on
//     that pod template (rollout.Stamp) by the operator itself, so that no
//     second writer of the template exists and nothing can ping-pong;
//   - never rolling into a missing ModelConfig, Secret or key, nor invalid TLS
//     content: the Deployment is left as it is and an Event says why.
package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/examples/kagent-operator/api/v1alpha2"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/chain"
)

// Name is the operator's field manager and Event source.
const Name = "kagent-example-operator"

// KindModelConfig is how the Agent index names the ModelConfig it references.
const KindModelConfig rollout.Kind = "ModelConfig"

// Event reasons.
const (
	EventRolledOut           = "RolledOut"
	EventModelConfigNotFound = "ModelConfigNotFound"
	EventMissingSecret       = "MissingSecret"
	EventInvalidTLS          = "InvalidTLS"
)

// Reconciler runs Agents as Deployments.
type Reconciler struct {
	// Client reads Agents, ModelConfigs and Deployments from the cache and
	// writes Deployments.
	Client client.Client
	// Secrets reads Secrets (a direct API reader: the cache holds only their
	// metadata).
	Secrets client.Reader
	// Recorder records Events on Agents.
	Recorder record.EventRecorder
	// Image is the agents' container image.
	Image string
	// Now returns the time TLS content is checked at (time.Now when nil).
	Now func() time.Time
	// HashOptions are passed to rollout.Compute (e.g. rollout.WithHashKey).
	HashOptions []rollout.HashOption
}

// SetupWithManager registers the field indexes and the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha2.ModelConfig{}, rollout.RefIndex, rollout.RefIndexer(ModelConfigRefs)); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha2.Agent{}, rollout.RefIndex, rollout.RefIndexer(agentRefs)); err != nil {
		return err
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Secrets == nil {
		r.Secrets = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(Name) //nolint:staticcheck // core/v1 Events, listed by kubectl describe
	}
	if r.Image == "" {
		r.Image = "registry.example.dev/kagent/agent:latest"
	}
	cache := mgr.GetCache()
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	agents := func() client.ObjectList { return &v1alpha2.AgentList{} }
	return ctrl.NewControllerManagedBy(mgr).
		Named("kagent-agent").
		For(&v1alpha2.Agent{}).
		Owns(&appsv1.Deployment{}).
		// A ModelConfig created, changed or deleted: its Agents.
		Watches(&v1alpha2.ModelConfig{}, handler.EnqueueRequestsFromMapFunc(
			rollout.MapReferrers(cache, KindModelConfig, agents))).
		// A Secret changed: the Agents whose ModelConfig names it.
		WatchesMetadata(secret, handler.EnqueueRequestsFromMapFunc(
			chain.MapThrough(cache, rollout.KindSecret,
				chain.Hop{Kind: KindModelConfig, NewList: func() client.ObjectList { return &v1alpha2.ModelConfigList{} }},
				chain.Hop{Kind: "Agent", NewList: agents})),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Complete(r)
}

// ModelConfigRefs returns the Secrets a ModelConfig names, for its index.
func ModelConfigRefs(obj client.Object) rollout.Refs {
	mc, ok := obj.(*v1alpha2.ModelConfig)
	if !ok {
		return nil
	}
	var refs rollout.Refs
	if s, _ := mc.Spec.APIKey(); s != "" {
		refs = append(refs, rollout.Ref{Kind: rollout.KindSecret, Name: s})
	}
	if s, _ := mc.Spec.CACert(); s != "" {
		if _, dup := refs.Find(rollout.KindSecret, s); !dup {
			refs = append(refs, rollout.Ref{Kind: rollout.KindSecret, Name: s})
		}
	}
	return refs
}

func agentRefs(obj client.Object) rollout.Refs {
	a, ok := obj.(*v1alpha2.Agent)
	if !ok {
		return nil
	}
	return rollout.Refs{{Kind: KindModelConfig, Name: a.ModelConfigName()}}
}

// Reconcile builds the Agent's Deployment from the Agent and its ModelConfig,
// stamped with the hash of the Secret keys it consumes.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	agent := &v1alpha2.Agent{}
	if err := r.Client.Get(ctx, req.NamespacedName, agent); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if agent.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	mc := &v1alpha2.ModelConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: agent.ModelConfigName()}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			// Keep the Deployment as it is: its pods still run on what they
			// mounted. The ModelConfig watch brings the Agent back.
			r.Recorder.Eventf(agent, corev1.EventTypeWarning, EventModelConfigNotFound,
				"ModelConfig %s not found; Deployment left unchanged", agent.ModelConfigName())
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}

	dep := r.deployment(agent, mc)
	tmpl := &dep.Spec.Template
	// What the pod template consumes is exactly what the hash covers.
	refs := rollout.PodSpecRefs(&tmpl.Spec)
	cfg, err := rollout.Compute(agent.Namespace, refs, r.lookup(ctx, agent.Namespace), r.HashOptions...)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(cfg.Missing) > 0 {
		r.Recorder.Eventf(agent, corev1.EventTypeWarning, EventMissingSecret,
			"%s; Deployment left unchanged", problems(cfg.Missing))
		return reconcile.Result{}, nil
	}
	if len(cfg.Invalid) > 0 {
		r.Recorder.Eventf(agent, corev1.EventTypeWarning, EventInvalidTLS,
			"%s; Deployment left unchanged", problems(cfg.Invalid))
		return reconcile.Result{}, nil
	}
	rollout.Stamp(tmpl, cfg.Hash)

	current := &appsv1.Deployment{}
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(dep), current)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	previous := ""
	if err == nil {
		previous = rollout.Stamped(&current.Spec.Template)
	}
	if err := r.apply(ctx, dep); err != nil {
		return reconcile.Result{}, err
	}
	if previous != "" && previous != cfg.Hash {
		r.Recorder.Eventf(agent, corev1.EventTypeNormal, EventRolledOut,
			"consumed Secret content changed (config hash %s → %s); rolling Deployment %s", short(previous), short(cfg.Hash), dep.Name)
		logger.Info("rolling", "deployment", dep.Name, "hash", cfg.Hash)
	}
	return reconcile.Result{}, nil
}

// deployment is the Deployment the Agent should have, not yet stamped.
func (r *Reconciler) deployment(agent *v1alpha2.Agent, mc *v1alpha2.ModelConfig) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "agent", "kagent.example.dev/agent": agent.Name}
	c := corev1.Container{
		Name:  "agent",
		Image: r.Image,
		Env:   []corev1.EnvVar{{Name: "MODEL", Value: mc.Spec.Model}},
	}
	var volumes []corev1.Volume
	if s, k := mc.Spec.APIKey(); s != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: s}, Key: k},
		}})
	}
	if s, k := mc.Spec.CACert(); s != "" {
		volumes = append(volumes, corev1.Volume{Name: "model-ca", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: s, Items: []corev1.KeyToPath{{Key: k, Path: "ca.crt"}}},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "model-ca", MountPath: "/etc/agent/model-ca", ReadOnly: true})
		c.Env = append(c.Env, corev1.EnvVar{Name: "MODEL_CA_FILE", Value: "/etc/agent/model-ca/ca.crt"})
	}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: agent.Name, Namespace: agent.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha2.GroupVersion.String(), Kind: "Agent", Name: agent.Name, UID: agent.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: volumes},
			},
		},
	}
}

// apply writes dep with server-side apply: the operator owns every field it
// sets, and an unchanged desired state is a no-op that rolls nothing.
func (r *Reconciler) apply(ctx context.Context, dep *appsv1.Deployment) error {
	b, err := json.Marshal(dep)
	if err != nil {
		return err
	}
	ac := &appsv1ac.DeploymentApplyConfiguration{}
	if err := json.Unmarshal(b, ac); err != nil {
		return err
	}
	ac.Status = nil
	return r.Client.Apply(ctx, ac, client.FieldOwner(Name), client.ForceOwnership)
}

// lookup reads the consumed Secrets by a direct GET, digesting them at once.
func (r *Reconciler) lookup(ctx context.Context, ns string) rollout.Lookup {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	return func(kind rollout.Kind, name string) (*rollout.Object, error) {
		switch kind {
		case rollout.KindSecret:
			s := &corev1.Secret{}
			if err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, nil
				}
				return nil, err
			}
			return rollout.SecretObject(s, now()), nil
		case rollout.KindConfigMap:
			c := &corev1.ConfigMap{}
			if err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, nil
				}
				return nil, err
			}
			return rollout.ConfigMapObject(c, now()), nil
		}
		return nil, fmt.Errorf("kagent operator: unexpected kind %s", kind)
	}
}

func problems(ps []rollout.Problem) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
