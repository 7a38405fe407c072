package census

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// podListWait bounds how long a census waits for the first list of a
// namespace's pods before it fails (and is retried): a list the API server
// refuses (RBAC) is an error of the census, not a census that never ends.
const podListWait = 30 * time.Second

// podFeed fills the pod index from the API server: one client-go reflector
// for every namespace, or, when the census has a namespace scope, one per
// namespace in it, started by the first census that needs it and stopped
// (its records dropped) when its namespace leaves the scope. Each reflector
// writes the records straight into the index (podStore): there is no
// informer, so no second store of the pods, no index of its own and no
// notification buffer, which is most of what a shared informer of 10,000
// pods holds (docs/census.md, At scale).
//
// It is the controller's source of pod events too: a change of a pod
// wakes every TrustRotation (the census spaces them, see spacing), one round
// of requests however many pods changed meanwhile.
type podFeed struct {
	pods    corev1client.PodsGetter
	index   *podIndex
	records *records
	wake    func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])
	gauge   func(float64) // the count of records, after each change

	poke    chan struct{}
	started chan struct{} // closed by Start: ctx is set

	mu      sync.Mutex
	ctx     context.Context       // the controller's, for the reflectors
	running map[string]*reflector // namespace ("": every one) -> its reflector
}

// reflector is one namespace's (or every namespace's) reflector.
type reflector struct {
	cancel context.CancelFunc
	done   chan struct{}
	synced chan struct{} // closed at its first list's end

	failed chan struct{} // signalled (capacity 1) by an attempt that failed

	mu      sync.Mutex
	listErr error // how the last attempt to list or watch failed (nil: it did not)
}

func newPodFeed(pods corev1client.PodsGetter, index *podIndex, rs *records, gauge func(float64),
	wake func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])) *podFeed {
	return &podFeed{pods: pods, index: index, records: rs, gauge: gauge, wake: wake,
		poke: make(chan struct{}, 1), started: make(chan struct{}), running: map[string]*reflector{}}
}

// Start runs the loop that turns pokes into requests until ctx is done, and
// keeps ctx for the reflectors (they stop with it).
func (f *podFeed) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	f.mu.Lock()
	if f.ctx != nil {
		f.mu.Unlock()
		return errors.New("census: the pod feed was started twice")
	}
	f.ctx = ctx
	f.mu.Unlock()
	close(f.started)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.poke:
				f.wake(ctx, q)
			}
		}
	}()
	return nil
}

func (f *podFeed) String() string { return "census pods" }

func (f *podFeed) changed() {
	f.gauge(float64(f.index.len()))
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// follow makes the index hold the pods of the namespaces of sc: it starts
// the reflectors sc needs, stops those of namespaces that left it (and
// forgets their pods), and returns once every one has listed its pods. A
// list that fails, or takes more than podListWait, is the error.
func (f *podFeed) follow(ctx context.Context, sc scope) error {
	select {
	case <-f.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	want := []string{metav1.NamespaceAll}
	if sc.in != nil {
		want = slices.Sorted(maps.Keys(sc.in))
	}
	f.mu.Lock()
	for ns, r := range f.running {
		_, in := sc.in[ns]
		if wanted := sc.in == nil && ns == metav1.NamespaceAll || sc.in != nil && in; !wanted {
			r.cancel()
			<-r.done
			delete(f.running, ns)
			f.index.drop(ns)
			f.changed()
		}
	}
	var waits []string
	for _, ns := range want {
		r := f.running[ns]
		if r == nil {
			r = f.run(ns)
			f.running[ns] = r
		}
		select {
		case <-r.synced:
		default:
			waits = append(waits, ns)
		}
	}
	f.mu.Unlock()
	if len(waits) == 0 {
		return nil
	}
	timeout := time.NewTimer(podListWait)
	defer timeout.Stop()
	for _, ns := range waits {
		f.mu.Lock()
		r := f.running[ns]
		f.mu.Unlock()
		if r == nil {
			continue
		}
		if err := r.wait(ctx, timeout.C); err != nil {
			what := "every namespace"
			if ns != "" {
				what = "namespace " + ns
			}
			return fmt.Errorf("listing the pods of %s: %w", what, err)
		}
	}
	return nil
}

// wait returns once r has listed its pods; else the list's error as soon
// as there is one, or when timeout fires, or ctx's.
func (r *reflector) wait(ctx context.Context, timeout <-chan time.Time) error {
	for {
		select {
		case <-r.synced:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return r.failure(fmt.Errorf("not listed after %s", podListWait))
		case <-r.failed:
			if err := r.failure(nil); err != nil {
				return err
			}
		}
	}
}

// failure is the error of the last attempt to list (or, streamed, to watch)
// the pods, else otherwise; nil once they are listed.
func (r *reflector) failure(otherwise error) error {
	select {
	case <-r.synced:
		return nil
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listErr != nil {
		return r.listErr
	}
	return otherwise
}

// attempt records how an attempt to list or watch ended (nil: it did not
// fail), until the pods are listed: then the reflector's own retries keep
// the pods it listed while it watches again.
func (r *reflector) attempt(err error) {
	r.mu.Lock()
	r.listErr = err
	r.mu.Unlock()
	if err != nil {
		select {
		case r.failed <- struct{}{}:
		default:
		}
	}
}

// run starts the reflector of namespace ns ("": every namespace). f.mu is
// held.
func (f *podFeed) run(ns string) *reflector {
	ctx, cancel := context.WithCancel(f.ctx)
	r := &reflector{cancel: cancel, done: make(chan struct{}), synced: make(chan struct{}), failed: make(chan struct{}, 1)}
	pods := f.pods.Pods(ns)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := pods.List(ctx, o)
			r.attempt(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := pods.Watch(ctx, o)
			r.attempt(err)
			return w, err
		},
	}
	name := "census pods"
	if ns != "" {
		name += " of " + ns
	}
	st := &podStore{feed: f, ns: ns, synced: r.synced}
	rf := toolscache.NewReflectorWithOptions(lw, &corev1.Pod{}, st, toolscache.ReflectorOptions{Name: name})
	go func() {
		defer close(r.done)
		rf.RunWithContext(ctx)
	}()
	return r
}

// podStore is the store of one reflector: it turns each Pod into its record
// (records.record) as it arrives and writes it into the index, so that a
// Pod lives no longer than its decoding; a pod that is going leaves the
// index (a census counts running pods only). With client-go's watch-list (a
// first list streamed as watch events), the reflector's temporary store of
// the first list holds records too (TransformingStore).
type podStore struct {
	feed   *podFeed
	ns     string
	synced chan struct{}
	once   sync.Once
}

var _ toolscache.TransformingStore = (*podStore)(nil)

func (s *podStore) Transformer() toolscache.TransformFunc { return s.feed.records.transform }

func (s *podStore) record(obj any) (*podRecord, error) {
	o, err := s.feed.records.transform(obj)
	if err != nil {
		return nil, err
	}
	r, ok := o.(*podRecord)
	if !ok {
		return nil, fmt.Errorf("census: the pod reflector stored a %T", obj)
	}
	return r, nil
}

func (s *podStore) Add(obj any) error { return s.Update(obj) }

func (s *podStore) Update(obj any) error {
	r, err := s.record(obj)
	if err != nil {
		return err
	}
	if r.gone {
		s.feed.index.remove(r.namespace, r.name)
	} else {
		s.feed.index.put(r)
	}
	s.feed.changed()
	return nil
}

func (s *podStore) Delete(obj any) error {
	var ns, name string
	if r, ok := obj.(*podRecord); ok {
		ns, name = r.namespace, r.name
	} else if m, err := meta.Accessor(obj); err == nil {
		ns, name = m.GetNamespace(), m.GetName()
	} else {
		return fmt.Errorf("census: the pod reflector deleted a %T", obj)
	}
	s.feed.index.remove(ns, name)
	s.feed.changed()
	return nil
}

func (s *podStore) Replace(list []any, _ string) error {
	rs := make([]*podRecord, 0, len(list))
	for _, obj := range list {
		r, err := s.record(obj)
		if err != nil {
			return err
		}
		if !r.gone {
			rs = append(rs, r)
		}
	}
	s.feed.index.replace(s.ns, rs)
	s.once.Do(func() { close(s.synced) })
	s.feed.changed()
	return nil
}

func (s *podStore) Resync() error { return nil }
