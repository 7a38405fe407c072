// Package demo plays hotcert's whole story on one machine: a local PKI, two
// control-plane replicas and many agents from the reference system, files updated the
// way the kubelet does it, and a sequence of rotations — safe ones that nobody may
// notice and a botched one that must be refused while service goes on. It records a
// timeline, prints a summary per phase, and reports every broken invariant.
package demo
