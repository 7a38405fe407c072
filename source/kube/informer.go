package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// follower runs an informer over the objects one list/watch pair selects, and knows
// whether its cache still follows them: every list and watch call the informer
// makes reports its outcome. The sources read from its cache while it follows, and
// from the API server otherwise.
type follower struct {
	what    string // the objects, for log lines: "Secret ns/api-tls"
	list    func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch   func(context.Context, metav1.ListOptions) (watch.Interface, error)
	example runtime.Object
	resync  time.Duration
	logger  *slog.Logger // given with WithLogger; nil: the reloader's (fallback)

	fallback atomic.Pointer[slog.Logger] // the reloader's, handed by SetDefaultLogger
	store    atomic.Pointer[cache.Store] // the informer's cache while run runs and has synced
	broken   atomic.Pointer[error]       // why the informer cannot list or watch; nil while it can
	behind   atomic.Bool                 // the watch is back, but the cache may not have caught up with the reads made without it
	changed  atomic.Pointer[func()]      // run's changed while it runs
}

// discard is the logger of a source given none and run by no Reloader.
var discard = slog.New(slog.DiscardHandler)

// log returns the logger of f's lines: its own, else its reloader's.
func (f *follower) log() *slog.Logger {
	if f.logger != nil {
		return f.logger
	}
	if l := f.fallback.Load(); l != nil {
		return l
	}
	return discard
}

// setDefaultLogger implements hotcert.SourceLogger for the sources over f.
func (f *follower) setDefaultLogger(l *slog.Logger) {
	if l != nil {
		f.fallback.Store(l)
	}
}

// poke tells run's caller that the content may have changed, if run runs.
func (f *follower) poke() {
	if c := f.changed.Load(); c != nil {
		(*c)()
	}
}

// cached returns the informer's cache while it follows the objects, and nil when
// reads must go to the API server: before the informer synced, while it cannot
// list or watch, and from when its watch is back until the cache has caught up.
func (f *follower) cached() cache.Store {
	if st := f.store.Load(); st != nil && f.broken.Load() == nil && !f.behind.Load() {
		return *st
	}
	return nil
}

// catchingUp returns the informer's cache while its watch is back but the cache may
// still lag the objects read from the API server while the watch was lost (the
// watch delivers the changes made meanwhile a moment after it opens; serving the
// cache before would serve material older than the reader already served), and
// nil otherwise. A read from the API server that finds the cache holding what it
// read calls caughtUp: from then on reads use the cache again.
func (f *follower) catchingUp() cache.Store {
	if st := f.store.Load(); st != nil && f.broken.Load() == nil && f.behind.Load() {
		return *st
	}
	return nil
}

// caughtUp records that the cache holds what the API server answered.
func (f *follower) caughtUp() { f.behind.Store(false) }

// lost reports whether the informer has synced once and then lost the objects.
func (f *follower) lost() bool { return f.broken.Load() != nil }

// run blocks until ctx is done, calling changed on every add, update and delete of
// the objects and whenever the cache starts or stops following them. The informer
// re-lists and re-watches by itself when a watch breaks.
func (f *follower) run(ctx context.Context, changed func()) error {
	f.changed.Store(&changed)
	defer f.changed.Store(nil)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := f.list(ctx, o)
			if err != nil {
				// A list that works does not make the cache follow: only a watch
				// does (a watch forbidden while list is allowed stays lost).
				f.followed(ctx, err, changed)
			}
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := f.watch(ctx, o)
			f.followed(ctx, err, changed)
			return w, err
		},
	}
	inf := cache.NewSharedIndexInformer(lw, f.example, f.resync, cache.Indexers{})
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return // routine: the informer re-lists or re-watches, and that call tells
		}
		f.followed(ctx, err, changed)
	}); err != nil {
		return fmt.Errorf("kube: %s: %w", f.what, err)
	}
	notify := func(any) { changed() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, _ any) { changed() },
		DeleteFunc: notify,
	}); err != nil {
		return fmt.Errorf("kube: %s: %w", f.what, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // the informer's goroutines end before run returns
	wg.Go(func() { inf.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		st := inf.GetStore()
		f.store.Store(&st)
		changed() // the cache may know more than the GET that loaded the first content
	}
	<-ctx.Done()
	f.store.Store(nil)
	f.broken.Store(nil)
	f.behind.Store(false) // a Watch run again starts from a fresh list
	return nil
}

// followed records whether the informer's cache follows the objects: err is the
// failure of a list or watch call (or of a watch that ended with it), nil is a
// watch call that opened a watch — the one outcome that makes a lost cache follow
// again. A change of state is logged once and answered with changed, so that the
// reloader re-reads: from the API server while the cache is stale, from the cache
// once it follows again.
func (f *follower) followed(ctx context.Context, err error, changed func()) {
	if ctx.Err() != nil {
		return // shutting down
	}
	if err == nil {
		if f.broken.Load() == nil {
			return
		}
		f.behind.Store(true) // before the cache may pass for following
		if f.broken.Swap(nil) != nil {
			f.log().Info("watch restored", "object", f.what)
			changed()
		}
		return
	}
	if f.broken.Swap(&err) == nil {
		f.log().Warn("can no longer list or watch; reading from the API server until it can",
			"object", f.what, "error", err.Error())
		changed()
	}
}
