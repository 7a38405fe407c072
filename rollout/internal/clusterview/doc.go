// Package clusterview is the rollout controller's view of the cluster: what it
// watches and keeps of Secrets, ConfigMaps and workloads, and how it reads
// them. It decides nothing: the controller (package rollout/controller) asks
// it what an object's keys digest to, which Secrets declare trust, and which
// namespaces are in scope, and tells it, through Config.IsReferenced and
// Config.Managed, which objects are worth keeping.
//
// What it is made of:
//
//   - a Store of the digests of referenced Secrets and ConfigMaps, never their
//     data (store.go);
//   - a Watcher, the reflectors that feed the Store and wake the controllers
//     that consume a changed object (watcher.go);
//   - the manager's cache options: the transforms that drop what no decision
//     reads (cache.go, subpath.go);
//   - under a namespace selector, the namespaces in scope (scope.go) and a
//     manager cache that follows them (scopecache.go).
package clusterview
