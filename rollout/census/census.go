package census

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/internal/podwire"
)

// FieldManager names the census controller's writes.
const FieldManager = "hotcert-census"

// Census is the census controller. Build it with New, give the manager its
// CacheOptions, then SetupWithManager.
type Census struct {
	opts    Options
	metrics *metrics

	cache  client.Reader
	api    client.Reader
	client client.Client
	events record.EventRecorder

	triggers *triggers // wakes a rotation when an object it reads changes
	records  *records  // builds the pod records
	pods     *podIndex // the pod records, by namespace
	feed     *podFeed  // fills pods, and wakes the rotations when one changes

	mu       sync.Mutex
	last     map[string]time.Time               // rotation -> when its last census was taken (real time, see spacing)
	seenPCRs map[string]map[types.UID]time.Time // rotation -> issued PodCertificateRequest -> first seen
}

// New returns a census controller with options o and registers its metrics.
func New(o Options) (*Census, error) {
	o = o.withDefaults()
	m, err := newMetrics(o.Registerer, o.MetricsPrefix)
	if err != nil {
		return nil, fmt.Errorf("census: registering metrics: %w", err)
	}
	return &Census{opts: o, metrics: m, records: newRecords(), pods: newPodIndex(), last: map[string]time.Time{}, seenPCRs: map[string]map[types.UID]time.Time{}}, nil
}

// SetupWithManager registers the controller: it reconciles each
// TrustRotation every Options.Interval, and when one changes or a pod does
// (pod events are coalesced: Options.MinSpacing between two censuses).
// The TrustRotation CRD must be installed; mgr's cache must have been built
// with CacheOptions.
func (c *Census) SetupWithManager(mgr manager.Manager) error {
	c.cache, c.api, c.client = mgr.GetCache(), mgr.GetAPIReader(), mgr.GetClient()
	c.events = mgr.GetEventRecorderFor(FieldManager) //nolint:staticcheck // core/v1 Events, as the rollout controller writes them
	meta, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("census: %w", err)
	}
	c.triggers = newTriggers(meta)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		c.triggers.stopAll()
		return nil
	})); err != nil {
		return fmt.Errorf("census: %w", err)
	}
	podsClient, err := podwire.NewPodsClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("census: %w", err)
	}
	wake := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		list := &v1alpha1.TrustRotationList{}
		if err := c.cache.List(ctx, list); err != nil {
			return
		}
		for _, r := range list.Items {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&r)})
		}
	}
	c.feed = newPodFeed(podsClient, c.pods, c.records, c.metrics.pods.Set, wake)
	err = ctrl.NewControllerManagedBy(mgr).
		Named("hotcert-census").
		For(&v1alpha1.TrustRotation{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(c.feed).
		WatchesRawSource(source.Channel(c.triggers.events, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: ptr.To(c.opts.SkipNameValidation)}).
		Complete(reconcile.Func(c.reconcile))
	if err != nil {
		return fmt.Errorf("census: building the controller: %w", err)
	}
	return nil
}
