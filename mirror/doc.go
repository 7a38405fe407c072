// Package mirror writes the material a hotcert.Reloader holds into a plain
// directory, for programs that reload files themselves but miss the kubelet's
// "..data" swap: Spring Boot's SSL bundles (which reload once and then never again
// from a mounted Secret), and JVM programs that read a PKCS#12 keystore and
// truststore.
//
// The Reloader reads and validates the material from any source (files and
// kubelet volumes, Kubernetes objects, SPIFFE, credential bundles); only what it
// published reaches the directory. Content it refuses is logged and counted once
// by the Reloader, and the directory keeps the last good files. On every change
// of the material (and of the PKCS#12 password, read from a file and followed
// like the material) a [Mirror] writes:
//
//	tls.crt         the certificate chain, leaf first (PEM)
//	tls.key         the leaf's private key (PEM, PKCS#8), mode 0600
//	ca.crt          the CA bundle (PEM)
//	keystore.p12    leaf, chain and key (PKCS#12), mode 0600   with a password
//	truststore.p12  the CA bundle as Java trusted-certificate entries (PKCS#12)
//
// each only when the material has that part, and only when its content changed.
//
// # Rename in place, not a symlink swap
//
// Each file is written to a temporary file in the same directory (its name starts
// with a dot and holds ".hotcert-tmp-"), synced, and renamed over the file; the
// directory is synced after the renames. A reader never sees a partly written
// file, and a file watcher sees an event that names the file: inotify's
// IN_MOVED_TO, which Java's WatchService reports as ENTRY_CREATE of "tls.crt" in
// the watched directory. The kubelet's way — every file a symlink through
// "..data", and one rename of "..data" — is atomic across all files, but the only
// event it raises names "..data": a watcher that registered the files' names, or
// resolved their symlinks to the timestamped directory the swap then deletes, sees
// nothing again, which is the bug this package exists for. Renaming in place
// trades that cross-file atomicity for events the watchers understand; within one
// update tls.key is renamed before tls.crt (a program that re-reads both when the
// certificate changes finds a matching pair) and the PKCS#12 keystore holds key
// and chain in one file, atomic by itself.
package mirror
