package controller

// outcome is one decision about a workload: what is counted in
// <prefix>_rollouts_total and said in an Event on the workload.
type outcome struct {
	// sig identifies the situation: an outcome whose sig is what was last
	// reported for the workload is not reported again ("" always reports).
	sig     string
	result  result // the metric's result label; "" counts nothing
	reason  reason // the metric's reason label
	event   eventReason
	warning bool // a Warning Event, not a Normal one
	note    string
}

// result is the "result" label of <prefix>_rollouts_total.
type result string

const (
	resultRolled   result = "rolled"
	resultDeferred result = "deferred"
	resultRefused  result = "refused"
	resultDryRun   result = "dry_run"
	resultAdopted  result = "adopted"
)

// reason is the "reason" label of <prefix>_rollouts_total: the controller's
// own below, or a refusal's problem reason (rollout.Reason: missing_object,
// missing_key, invalid_tls, out_of_scope, cross_namespace).
type reason string

const (
	reasonConfigChanged reason = "config_changed"
	reasonMinInterval   reason = "min_interval"
	reasonInProgress    reason = "in_progress"
	reasonBudget        reason = "budget"
	reasonOptedIn       reason = "opted_in"
	// reasonReferencesChanged: the set of consumed objects or keys changed.
	reasonReferencesChanged reason = "references_changed"
	// reasonStateRemoved: another writer removed the recorded state; the
	// workload was adopted again.
	reasonStateRemoved reason = "state_removed"
	// reasonNoPodTemplate: a declared kind's object has no pod template
	// where its ReferenceRule says (spec.rollout.podTemplate).
	reasonNoPodTemplate reason = "no_pod_template"
	// reasonFieldPruned: the API server did not keep the field a declared
	// kind's rollout writes (spec.rollout.restartAt not in the kind's schema).
	reasonFieldPruned reason = "field_pruned"
)

// eventReason is the reason of an Event on the workload (docs/rollout-controller.md
// lists them).
type eventReason string

const (
	// eventAdopted: the workload was opted in; the baseline was recorded and
	// nothing was restarted.
	eventAdopted eventReason = "Adopted"
	// eventRebased: the workload consumes other objects or keys than before
	// (its pod template or a chain changed); the new baseline was recorded and
	// nothing was restarted.
	eventRebased eventReason = "BaselineUpdated"
	// eventStateRemoved (Warning): another writer removed the controller's
	// state annotations from a workload it had adopted; it was adopted again.
	eventStateRemoved eventReason = "StateRemoved"
	// eventRolled: consumed content changed and the pod template was stamped.
	eventRolled eventReason = "Rolled"
	// eventDeferred: a change waits for the minimum interval, the previous
	// rollout or the global budget.
	eventDeferred eventReason = "RolloutDeferred"
	// eventRefused: a required object or key is missing, TLS content is
	// unusable, or the API server did not keep a declared kind's rollout
	// field: no rollout.
	eventRefused eventReason = "RolloutRefused"
	// eventWouldRoll: dry run; the rollout that would have been made.
	eventWouldRoll eventReason = "WouldRoll"
	// eventInvalidAnnotation: a hotcert.dev annotation has a malformed value.
	eventInvalidAnnotation eventReason = "InvalidAnnotation"
)
