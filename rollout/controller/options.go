package controller

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Defaults of [Options].
const (
	DefaultMinInterval        = time.Minute
	DefaultMaxRollouts        = 30
	DefaultBudgetWindow       = time.Minute
	DefaultRolloutWaitTimeout = 10 * time.Minute
	DefaultMaxConcurrency     = 4
	DefaultMetricsPrefix      = "hotcert"
)

// Options configure the rollout controller. The zero value is usable: every zero
// field takes its default (see Default).
type Options struct {
	// MinInterval is the minimum time between two rollouts of one workload
	// (default DefaultMinInterval); a workload's hotcert.dev/min-interval
	// annotation overrides it. Changes inside the interval coalesce into one
	// rollout at its end. A negative value means none.
	MinInterval time.Duration
	// MaxRollouts caps rollouts across all workloads per BudgetWindow (default
	// DefaultMaxRollouts per DefaultBudgetWindow); a negative value means no cap.
	MaxRollouts  int
	BudgetWindow time.Duration
	// RolloutWaitTimeout bounds how long a change waits for the workload's
	// previous rollout to finish, from when the change was detected (default
	// DefaultRolloutWaitTimeout). A Deployment past its progress deadline is not
	// waited for.
	RolloutWaitTimeout time.Duration
	// DryRun makes the controller write nothing: it reports the rollouts it would
	// do with an Event and a metric. A workload's hotcert.dev/dry-run annotation
	// does the same for one workload.
	DryRun bool
	// CacheSecretData caches whole Secrets and ConfigMaps (as Reloader, wave and
	// kagent do) instead of their metadata only. It exists to measure the
	// difference; leave it off.
	CacheSecretData bool
	// HashKey, if set, keys the hashes (HMAC-SHA256); see rollout.WithHashKey.
	HashKey []byte
	// MaxConcurrentReconciles per workload kind (default DefaultMaxConcurrency).
	MaxConcurrentReconciles int
	// Registerer receives the metrics (default controller-runtime's registry,
	// served by the manager's metrics endpoint); MetricsPrefix prefixes their
	// names (default "hotcert").
	Registerer    prometheus.Registerer
	MetricsPrefix string
	// Clock is the controller's clock (default the real one).
	Clock clock.PassiveClock
	// SkipNameValidation lets several managers in one process (tests) register
	// controllers of the same name.
	SkipNameValidation bool
}

// Default returns o with every zero field set to its default.
func (o Options) Default() Options {
	if o.MinInterval == 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MinInterval < 0 {
		o.MinInterval = 0
	}
	if o.MaxRollouts == 0 {
		o.MaxRollouts = DefaultMaxRollouts
	}
	if o.BudgetWindow == 0 {
		o.BudgetWindow = DefaultBudgetWindow
	}
	if o.RolloutWaitTimeout == 0 {
		o.RolloutWaitTimeout = DefaultRolloutWaitTimeout
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrency
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
	if o.MetricsPrefix == "" {
		o.MetricsPrefix = DefaultMetricsPrefix
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports the first nonsensical option.
func (o Options) Validate() error {
	switch {
	case o.BudgetWindow < 0:
		return fmt.Errorf("rollout budget window %s is negative", o.BudgetWindow)
	case o.RolloutWaitTimeout < 0:
		return fmt.Errorf("rollout wait timeout %s is negative", o.RolloutWaitTimeout)
	case o.MaxConcurrentReconciles < 0:
		return fmt.Errorf("max concurrent reconciles %d is negative", o.MaxConcurrentReconciles)
	}
	return nil
}
