package file

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch blocks until ctx is done, calling changed whenever the files may have
// changed. It watches the directories holding the files
// (never the files: the kubelet's symlink swap names no file and kills file watches)
// and calls changed on any event in them. Directories that cannot be watched — not
// created yet, deleted and recreated, or inotify unavailable — are retried every
// re-watch interval; each success calls changed, since anything may have happened
// while unwatched. Watch errors (e.g. an event queue overflow) are logged, answered
// with changed, and never end watching.
func (s *Set) Watch(ctx context.Context, changed func()) error {
	dirs := s.dirs()
	var w *fsnotify.Watcher
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	var events <-chan fsnotify.Event
	var errs <-chan error
	watched := map[string]bool{}

	ensure := func() {
		if w == nil {
			nw, err := fsnotify.NewWatcher()
			if err != nil {
				s.log().Warn("file watch unavailable; relying on polling", "source", s.String(), "error", err.Error())
				return
			}
			w, events, errs = nw, nw.Events, nw.Errors
			clear(watched)
		}
		current := w.WatchList()
		added := false
		for _, d := range dirs {
			if watched[d] && slices.Contains(current, d) {
				continue
			}
			watched[d] = false
			if err := w.Add(d); err != nil {
				continue // not there yet; the next re-watch tick tries again
			}
			watched[d] = true
			added = true
		}
		if added {
			changed()
		}
	}
	ensure()

	tick := time.NewTicker(s.rewatch)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			ensure()
		case ev, ok := <-events:
			if !ok {
				w, events, errs = nil, nil, nil
				continue
			}
			if ev.Op.Has(fsnotify.Remove) && slices.Contains(dirs, ev.Name) {
				watched[ev.Name] = false // the directory itself went away
			}
			changed()
		case err, ok := <-errs:
			if !ok {
				w, events, errs = nil, nil, nil
				continue
			}
			s.log().Warn("file watch error; re-reading", "source", s.String(), "error", fmt.Sprint(err))
			changed()
		}
	}
}
