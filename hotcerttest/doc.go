// Package hotcerttest provides a small test PKI and a faithful re-implementation
// of the kubelet's AtomicWriter, for tests of certificate hot rotation.
//
// The PKI side builds root and intermediate CAs and issues leaf certificates
// with sensible defaults (ECDSA P-256 keys, "localhost" SANs, serverAuth and
// clientAuth, valid from one minute ago for 24 hours), tuned with functional
// [Option] values such as [WithDNSNames], [WithValidity] or [WithKeyType].
//
// The filesystem side reproduces how the kubelet projects a Secret or
// ConfigMap volume: [AtomicWriter] writes a new hidden timestamped directory
// and renames a "..data_tmp" symlink over "..data", so every key flips at
// once and user-visible files are stable symlinks ("tls.crt -> ..data/tls.crt").
// [WriteFileNonAtomic] and [Truncate] produce the broken states that
// non-kubelet writers can leave behind.
//
// [FakeClock] is a clock a test moves by hand: given to a reloader with
// hotcert.WithTimerClock, it both judges validity and times the reloader's wait for
// a renewal's NotBefore, so a test crosses hours without sleeping.
//
// The package does not import "testing": errors are returned, and the Must…
// variants panic, so it can be used from programs (such as a demo) as well as
// from tests.
package hotcerttest
