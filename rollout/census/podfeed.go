package census

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
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
	st := &podStore{feed: f, ns: ns, synced: r.synced}
	lw := listsStreamed{&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := st.list(ctx, pods, o)
			r.attempt(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := pods.Watch(ctx, o)
			r.attempt(err)
			return w, err
		},
	}}
	name := "census pods"
	if ns != "" {
		name += " of " + ns
	}
	rf := toolscache.NewReflectorWithOptions(lw, &corev1.Pod{}, st, toolscache.ReflectorOptions{Name: name})
	go func() {
		defer close(r.done)
		rf.RunWithContext(ctx)
	}()
	return r
}

// listsStreamed is the pod feed's ListWatch, with the reflector's own
// streamed first list (client-go's watch-list) turned off: its List streams
// already (podStore.list).
type listsStreamed struct{ *toolscache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector to call List, not
// to stream a list itself.
func (listsStreamed) IsWatchListSemanticsUnSupported() bool { return true }

// podStore is the store of one reflector: it turns each Pod into its record
// (records.record) as it arrives and writes it into the index, so that a
// Pod lives no longer than its decoding; a pod that is going leaves the
// index (a census counts running pods only).
type podStore struct {
	feed   *podFeed
	ns     string
	synced chan struct{}
	once   sync.Once

	mu       sync.Mutex
	staged   []*podRecord // the records of the list the reflector replaces the store with next
	unstream atomic.Bool  // the API server refused a streamed list: list them as an informer does
}

// streamTimeout bounds a streamed list, as client-go's reflector bounds its
// own: a stream that has not ended by then is retried.
const streamTimeout = 5 * time.Minute

// list lists the pods for the reflector as a streamed list (the API
// server's initial events, then its initial-events-end bookmark), each Pod
// turned into its record as it arrives and staged for the Replace that
// follows; it returns an empty PodList at the stream's resource version,
// from which the reflector watches. This is client-go's watch-list
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#streaming-lists)
// done here rather than by the reflector, because the reflector keeps the
// stream in a temporary Store (a map of every pod by "namespace/name") and
// lists it twice before it replaces its store: a second index of every
// pod, live when the heap's goal for the minutes after is set, which made
// the census's peak memory pass its aim (docs/census.md, At scale). An API
// server that refuses a streamed list (before Kubernetes 1.27, or with its
// WatchList feature off) gets an ordinary list, as the reflector makes it
// (paged or not), from then on.
func (s *podStore) list(ctx context.Context, pods corev1client.PodInterface, o metav1.ListOptions) (runtime.Object, error) {
	if s.unstream.Load() || o.Continue != "" {
		return pods.List(ctx, o)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{
		LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector,
		ResourceVersion: o.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		TimeoutSeconds: ptr.To(int64(streamTimeout.Seconds())),
	})
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		s.unstream.Store(true)
		return pods.List(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	staged := make([]*podRecord, 0, s.feed.index.lenOf(s.ns))
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil, errors.New("census: the streamed list of the pods ended before its initial-events-end bookmark")
		}
		switch ev.Type {
		case watch.Error:
			return nil, apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				return nil, fmt.Errorf("census: a bookmark of the pods' streamed list: %w", err)
			}
			if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				s.mu.Lock()
				s.staged = staged
				s.mu.Unlock()
				return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: m.GetResourceVersion()}}, nil
			}
		case watch.Added, watch.Modified, watch.Deleted:
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return nil, fmt.Errorf("census: the pods' streamed list sent a %T", ev.Object)
			}
			if ev.Type == watch.Deleted {
				staged = append(staged, s.feed.records.gone(p.Namespace, p.Name))
			} else {
				staged = append(staged, s.feed.records.record(p))
			}
		}
	}
}

func (s *podStore) Add(obj any) error { return s.Update(obj) }

func (s *podStore) Update(obj any) error {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("census: the pod reflector stored a %T", obj)
	}
	r := s.feed.records.record(p)
	if r.gone {
		s.feed.index.remove(r.namespace, r.name)
	} else {
		s.feed.index.put(r)
	}
	s.feed.changed()
	return nil
}

func (s *podStore) Delete(obj any) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("census: the pod reflector deleted a %T", obj)
	}
	s.feed.index.remove(m.GetNamespace(), m.GetName())
	s.feed.changed()
	return nil
}

// Replace makes the index hold the records of a list: those its streamed
// list staged, and those of the Pods of list (an ordinary list's).
func (s *podStore) Replace(list []any, _ string) error {
	s.mu.Lock()
	rs := s.staged
	s.staged = nil
	s.mu.Unlock()
	rs = slices.Grow(rs, len(list))
	for _, obj := range list {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return fmt.Errorf("census: the pod reflector listed a %T", obj)
		}
		rs = append(rs, s.feed.records.record(p))
	}
	s.feed.index.replace(s.ns, rs)
	s.once.Do(func() { close(s.synced) })
	s.feed.changed()
	return nil
}

func (s *podStore) Resync() error { return nil }
