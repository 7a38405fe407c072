package rollout

// Well-known annotation keys. Users set the first three on a workload's metadata;
// the controller owns the others.
const (
	// AnnotationRolloutOnChange opts a Deployment, StatefulSet or DaemonSet in:
	// "true" makes the controller roll it when a consumed Secret or ConfigMap key
	// changes.
	AnnotationRolloutOnChange = "hotcert.dev/rollout-on-change"

	// AnnotationMinInterval overrides the controller's minimum interval between
	// two rollouts of this workload, as a Go duration ("10m", "30s", "0s").
	AnnotationMinInterval = "hotcert.dev/min-interval"

	// AnnotationDryRun set to "true" makes the controller only report, with an
	// Event and a metric, the rollouts it would do for this workload.
	AnnotationDryRun = "hotcert.dev/dry-run"

	// AnnotationConfigHash is the pod-template annotation the controller writes to
	// roll a workload: the hash of every consumed key. It is written only when the
	// consumed content changes, never when a workload is adopted.
	AnnotationConfigHash = "hotcert.dev/config-hash"

	// AnnotationAppliedHash (workload metadata) is the hash of the consumed content
	// the current pod template reflects: recorded at adoption without rolling, and
	// at every rollout.
	AnnotationAppliedHash = "hotcert.dev/applied-hash"

	// AnnotationAppliedKeys (workload metadata) records a salted digest per
	// consumed object and key (JSON), so the controller can say which key changed
	// and can tell a content change from a pod-template edit that only added or
	// removed a reference.
	AnnotationAppliedKeys = "hotcert.dev/applied-keys"

	// AnnotationLastRollout (workload metadata) is the RFC 3339 time of the last
	// rollout the controller made: the minimum interval counts from it, across
	// controller restarts and leader changes.
	AnnotationLastRollout = "hotcert.dev/last-rollout"
)

// Rollout windows, expiry and rotate-now (docs/rollout-controller.md,
// "Restart windows"). Users set the first three; the controller owns the
// others.
const (
	// AnnotationRolloutWindows, on a workload or a Namespace, restricts when
	// the controller rolls: a ";"-separated list of recurring windows
	// ("CRON_TZ=Europe/Berlin 0 2 * * SAT for 4h") and explicit ones
	// ("2026-12-27T22:00:00Z/2026-12-28T02:00:00Z"); "always" on a workload
	// lifts its namespace's or ReferenceRule's windows. A change outside a
	// window waits for the next one, unless the certificate the pods run
	// would reach its expiry margin first.
	AnnotationRolloutWindows = "hotcert.dev/rollout-windows"

	// AnnotationExpiryMargin overrides how long before the running leaf
	// certificate's NotAfter a pending change rolls whatever the windows say:
	// a share of the certificate's lifetime ("25%") or a Go duration ("6h").
	AnnotationExpiryMargin = "hotcert.dev/expiry-margin"

	// AnnotationRotateNow, set to a new token (any text: a timestamp, a
	// ticket number), rolls the workload once, now, outside any window and
	// minimum interval, within the other safety checks (budget, trust guard,
	// refusals). A token is honoured once (see AnnotationRotated).
	AnnotationRotateNow = "hotcert.dev/rotate-now"

	// AnnotationRotated (workload metadata) is the last rotate-now token the
	// controller honoured, written in the same update as the rollout it made.
	AnnotationRotated = "hotcert.dev/rotated"

	// AnnotationRunningValidity (workload metadata) is the validity of the
	// leaf certificate the workload's pods run ("notBefore/notAfter", RFC
	// 3339), recorded at adoption and at every rollout: the expiry a window
	// is never allowed to reach. Dates only, never key material.
	AnnotationRunningValidity = "hotcert.dev/running-validity"

	// AnnotationRolloutPending (workload metadata), while a change waits for
	// a window, says since when, when it will roll and why
	// ("since=…; rolls-at=…; deadline=…; reason=outside_window"); removed when
	// it rolls.
	AnnotationRolloutPending = "hotcert.dev/rollout-pending"
)

// Annotations users set on a consumed Secret or ConfigMap (see [Exceptions]).
const (
	// AnnotationIgnoreKeys names keys of the object, comma-separated, whose
	// changes never roll a workload: they are left out of the hash.
	AnnotationIgnoreKeys = "hotcert.dev/ignore-keys"

	// AnnotationIgnore set to "true" makes no change of the object roll a
	// workload, and its TLS content is not checked either.
	AnnotationIgnore = "hotcert.dev/ignore"
)

// FieldManager is the field manager name of the controller's writes.
const FieldManager = "hotcert-controller"
