// Package deploy checks hotcert's installation manifests against the real
// tools and the real API server: the Helm chart (helm/hotcert-controller),
// rendered and linted with Helm's own packages, and the kustomize base and
// overlays (kustomize/), built with kustomize's krusty, are applied to a
// kube-apiserver and run the hotcert-controller binary with exactly the RBAC
// and arguments they declare.
//
// The module holds tests only; its heavy dependencies (Helm, kustomize,
// cert-manager's and trust-manager's APIs, Prometheus) never reach the
// library's importers. Sub-packages: prometheus (alert rules and dashboard),
// trustmanager (the CA-rotation recipe with trust-manager).
package deploy
