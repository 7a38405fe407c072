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
