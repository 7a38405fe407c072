package controller

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
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

func newMetrics(reg prometheus.Registerer, prefix string, cachedObjects func() float64) (*metrics, error) {
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
			Help: "Workloads with a content change waiting (minimum interval, previous rollout, budget), by kind.",
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
	}
	for _, c := range []prometheus.Collector{m.rollouts, m.errors, m.pending, m.reads, m.objects, m.subPath, m.queue} {
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
