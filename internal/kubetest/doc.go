// Package kubetest runs a real Kubernetes control plane for tests.
//
// An [Env] is controller-runtime's envtest: a real etcd and kube-apiserver
// (v1.37.2, built from the Go module proxy by `make k8s-bins` into .bin/k8s),
// optionally with the real kube-controller-manager ([WithControllerManager])
// so that Deployments get ReplicaSets, garbage collection runs, and so on.
// There are no nodes and no scheduler: Pods stay Pending.
//
// The binaries are looked up in $KUBEBUILDER_ASSETS (the Makefile exports it)
// or, when that is unset, in .bin/k8s beside the go.mod of an enclosing
// directory. When they are missing the test fails, telling to run
// `make k8s-bins`; it is never skipped.
//
// # One Env per test package
//
// Starting a control plane takes a few seconds, so share one per test package
// through TestMain, and isolate tests from one another by namespace:
//
//	var env *kubetest.Env
//
//	func TestMain(m *testing.M) {
//		kubetest.Main(m, &env, kubetest.WithControllerManager())
//	}
//
//	func TestSomething(t *testing.T) {
//		ns := env.NewNamespace(t)
//		_, err := env.Clientset().CoreV1().Secrets(ns).Create(...)
//		...
//	}
//
// [Main] starts the Env before any test runs, stops it afterwards, and prints
// the control plane's output when a test failed. A test that needs a control
// plane of its own (other flags, or one it may break) calls [Start], which
// stops it when the test ends and logs its output only if the test failed.
//
// [Env.Restart] restarts kube-apiserver on the same etcd, for tests of
// reconnecting clients and informers; on a shared Env it disturbs every test
// running at the time, so such tests must not run in parallel with others.
//
// [Env.NewRestrictedConfig] provisions a user holding exactly the given RBAC
// rules, to prove a component works with minimal permissions (and fails
// without them).
package kubetest
