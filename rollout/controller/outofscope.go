package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hotcert/hotcert/rollout"
)

// eventOutOfScope (Warning): a workload the controller managed left its scope
// (its namespace stopped matching the namespace selector, or its labels the
// workload selector). It is not rolled from then on; its stamp and state
// annotations stay, so if it comes back in scope it is managed from that
// state, as after a controller restart.
const eventOutOfScope eventReason = "OutOfScope"

// setupScope checks that the manager's cache follows the namespace selector
// and adds the scopeReporter, with either selector.
func (c *Controller) setupScope(mgr manager.Manager) error {
	o := c.opts
	if o.NamespaceSelector != nil {
		if !c.view.Follows(mgr.GetCache()) {
			return errors.New("controller: a namespace selector needs the manager built with the controller's NewCache")
		}
	}
	if o.NamespaceSelector == nil && o.WorkloadSelector == nil {
		return nil
	}
	return mgr.Add(&scopeReporter{c: c, cache: mgr.GetCache(), api: mgr.GetAPIReader(),
		rec: mgr.GetEventRecorderFor(rollout.FieldManager), log: mgr.GetLogger().WithName("scope")}) //nolint:staticcheck // core/v1 Events, as the reconcilers' (see SetupWithManager)
}

// scopeReporter says so, with an Event and a log line, when a workload the
// controller manages leaves its scope, rather than leave it half-managed
// silently: the workload's watch reports it as deleted (the API server does
// so for an object that stops matching a watch's label selector, and the
// scoped cache for the objects of a namespace that leaves), and a GET tells a
// real deletion from a departure. It runs on the leader only.
type scopeReporter struct {
	c     *Controller
	cache cache.Cache
	api   client.Reader
	rec   record.EventRecorder
	log   logr.Logger
}

func (r *scopeReporter) NeedLeaderElection() bool { return true }

func (r *scopeReporter) Start(ctx context.Context) error {
	for _, k := range workloadKinds {
		inf, err := r.cache.GetInformer(ctx, k.newObj(), cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("controller: watching %ss leave the scope: %w", k.name, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) { go r.left(ctx, k, obj) },
		}); err != nil {
			return fmt.Errorf("controller: watching %ss leave the scope: %w", k.name, err)
		}
	}
	<-ctx.Done()
	return nil
}

// left handles the deletion of workload obj of kind k from the cache.
func (r *scopeReporter) left(ctx context.Context, k workloadKind, obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok || !(optedIn(o) || hasState(o)) {
		return
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(k.name))
	if err := r.api.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		if !apierrors.IsNotFound(err) {
			r.log.Error(err, "reading a workload that left the cache", "kind", k.name, "namespace", o.GetNamespace(), "name", o.GetName())
		}
		return // deleted, or unknown: nothing to say
	}
	why := ""
	switch {
	case r.c.view.OutOfScope(o.GetNamespace()):
		why = fmt.Sprintf("its namespace no longer matches the namespace selector %q", r.c.opts.NamespaceSelector)
	case r.c.opts.WorkloadSelector != nil && !r.c.opts.WorkloadSelector.Matches(labels.Set(live.GetLabels())):
		why = fmt.Sprintf("its labels no longer match the workload selector %q", r.c.opts.WorkloadSelector)
	default:
		return
	}
	msg := "Left the controller's scope: " + why + "; it will not be rolled (its stamp and state annotations stay, and apply again if it comes back in scope)"
	r.log.Info("workload left the scope", "kind", k.name, "namespace", o.GetNamespace(), "name", o.GetName(), "reason", why)
	r.rec.Event(live, corev1.EventTypeWarning, string(eventOutOfScope), msg)
}
