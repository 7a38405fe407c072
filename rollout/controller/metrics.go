package controller

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// metrics are the controller's Prometheus collectors. Counters move once per
// decision, never per resync or per repeated reconcile of the same situation.
type metrics struct {
	rollouts *prometheus.CounterVec // {kind, result, reason}
	errors   *prometheus.CounterVec // {kind}
	pending  *prometheus.GaugeVec   // {kind}
	reads    *prometheus.CounterVec // {kind}: API reads of Secret/ConfigMap data
	objects  prometheus.GaugeFunc   // digests held in memory
	subPath  *prometheus.CounterVec // {kind}: changes subPath consumers never see (see subpath.go)
	queue    *queueDepth            // {kind}
	// overrides counts rollouts made outside the rollout windows {kind, reason}.
	overrides *prometheus.CounterVec
	waiting   *waiting // {kind}: changes waiting for a window, or past their deadline
}

// waiting follows the workloads whose change waits, with the deadline the
// certificate their pods run sets (see windows.go), and counts them at scrape
// time: those waiting for a rollout window, and those still waiting past
// their deadline (held by the budget, the trust guard, a refusal, or a
// controller that cannot write).
type waiting struct {
	pendingDesc, overdueDesc *prometheus.Desc
	clock                    clock.PassiveClock

	mu sync.Mutex
	m  map[string]waitingChange // by workload key
}

type waitingChange struct {
	kind     string
	window   bool      // waiting for a rollout window
	deadline time.Time // zero: unknown
}

func (w *waiting) set(key string, c waitingChange) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[key] = c
}

func (w *waiting) clear(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

func (w *waiting) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.pendingDesc
	ch <- w.overdueDesc
}

func (w *waiting) Collect(ch chan<- prometheus.Metric) {
	now := w.clock.Now()
	w.mu.Lock()
	pending, overdue := map[string]int{}, map[string]int{}
	for _, c := range w.m {
		pending[c.kind] += 0
		overdue[c.kind] += 0
		if c.window {
			pending[c.kind]++
		}
		if !c.deadline.IsZero() && !now.Before(c.deadline) {
			overdue[c.kind]++
		}
	}
	w.mu.Unlock()
	for kind, n := range pending {
		ch <- prometheus.MustNewConstMetric(w.pendingDesc, prometheus.GaugeValue, float64(n), kind)
		ch <- prometheus.MustNewConstMetric(w.overdueDesc, prometheus.GaugeValue, float64(overdue[kind]), kind)
	}
}

// queueDepth reads the length of each controller's work queue at scrape time.
type queueDepth struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	queues map[string]func() int
}

func (q *queueDepth) set(kind string, length func() int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queues[kind] = length
}

func (q *queueDepth) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q *queueDepth) Collect(ch chan<- prometheus.Metric) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for kind, length := range q.queues {
		ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(length()), kind)
	}
}

func newMetrics(reg prometheus.Registerer, prefix string, clk clock.PassiveClock, cachedObjects func() float64) (*metrics, error) {
	m := &metrics{
		rollouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_rollouts_total",
			Help: "Rollout decisions by workload kind, result (rolled, deferred, refused, dry_run, adopted) and reason.",
		}, []string{"kind", "result", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_rollout_reconcile_errors_total",
			Help: "Reconciles that failed (API errors) and were retried, by workload kind.",
		}, []string{"kind"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_rollout_pending_workloads",
			Help: "Workloads with a content change waiting (minimum interval, previous rollout, budget, trust guard, rollout window), by kind.",
		}, []string{"kind"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_rollout_object_reads_total",
			Help: "Reads of Secret or ConfigMap data from the API server (one per new version of a referenced object).",
		}, []string{"kind"}),
		objects: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: prefix + "_rollout_digested_objects",
			Help: "Referenced Secrets and ConfigMaps whose key digests are held in memory (their data never is).",
		}, cachedObjects),
		subPath: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_rollout_subpath_changes_total",
			Help: "Changes of a Secret or ConfigMap key that a workload which is not opted in mounts with subPath, so its running pods never see them (one per change and workload), by workload kind.",
		}, []string{"kind"}),
		queue: &queueDepth{
			desc: prometheus.NewDesc(prefix+"_rollout_queue_depth",
				"Workloads waiting in the work queue, ready to reconcile, by kind.", []string{"kind"}, nil),
			queues: map[string]func() int{},
		},
		overrides: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_rollout_window_overrides_total",
			Help: "Rollouts made outside the workload's rollout windows, by kind and reason (expiry_margin: the certificate its pods run reached its expiry margin).",
		}, []string{"kind", "reason"}),
		waiting: &waiting{
			pendingDesc: prometheus.NewDesc(prefix+"_rollout_window_pending_workloads",
				"Workloads whose change waits for a rollout window, by kind.", []string{"kind"}, nil),
			overdueDesc: prometheus.NewDesc(prefix+"_rollout_overdue_workloads",
				"Workloads whose change still waits although the certificate their pods run is past its expiry margin, by kind.", []string{"kind"}, nil),
			clock: clk,
			m:     map[string]waitingChange{},
		},
	}
	for _, c := range []prometheus.Collector{m.rollouts, m.errors, m.pending, m.reads, m.objects, m.subPath, m.queue, m.overrides, m.waiting} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("rollout metrics are already registered: use another Registerer or MetricsPrefix")
			}
			return nil, err
		}
	}
	return m, nil
}
