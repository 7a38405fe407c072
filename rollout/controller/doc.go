// Package controller is hotcert's rollout controller (the hotcert-controller binary): it
// rolls the Deployments, StatefulSets and DaemonSets annotated
// hotcert.dev/rollout-on-change: "true" when a Secret or ConfigMap key they
// consume changes, with the parts of package rollout.
//
// The hotcert-controller binary (cmd/hotcert-controller, flags in its
// app/options package) runs it in a manager of its own; run it inside yours:
//
//	ctl, err := controller.New(controller.Options{
//		MinInterval: 5 * time.Minute,
//		Namespaces:  []string{"team-a"}, // default: all
//	})
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		Cache:    ctl.CacheOptions(),  // workloads without what the controller never reads
//		NewCache: ctl.NewCache,        // needed with Options.NamespaceSelector
//		Client:   ctl.ClientOptions(), // Secrets are never read through the cache
//	})
//	err = ctl.SetupWithManager(mgr)
//
// Per workload, each reconcile resolves what its pod template consumes
// (and, with Options.ReferenceRules, what the chains of custom resources that
// reach it consume), hashes those keys, and compares them with the baseline
// recorded in the workload's annotations. Opting in records the baseline
// without a rollout. A change of content that a consumed object's exception
// annotations (hotcert.dev/ignore-keys, hotcert.dev/ignore) cover is recorded
// and rolls nothing. Any other change rolls the workload by stamping the
// pod-template annotation hotcert.dev/config-hash, unless
//
//   - a required object or key is missing, or TLS content is unusable
//     (refused);
//   - a certificate is not valid yet, the trust guard finds a server
//     certificate and a bundle declared to trust it (hotcert.dev/trusted-by)
//     that do not verify, the minimum interval since the last rollout has not
//     passed, the previous rollout has not finished, or the global budget is
//     spent (deferred);
//   - the controller (Options.DryRun) or the workload (hotcert.dev/dry-run)
//     runs dry: the rollout it would do is reported, and nothing is written.
//
// Every decision is an Event on the workload and a Prometheus metric; every
// piece of state lives in the API.
//
// Secrets and ConfigMaps are not cached: the controller's own reflector keeps,
// of each object an opted-in workload references, only the digests of its
// keys, and nothing at all of the others (see SecretCache; the code is in
// rollout/internal/clusterview). With
// Options.Webhook, the controller also serves the admission webhook of package
// rollout/webhook.
package controller
