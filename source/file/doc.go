// Package file is a [hotcert.Source] that reads a certificate, a private key and a CA
// bundle from files, and watches them the way Kubernetes updates mounted Secrets and
// ConfigMaps.
//
// The kubelet never rewrites a projected file: it writes a new hidden timestamped
// directory and renames a "..data_tmp" symlink over "..data". No event names tls.crt,
// a watch on the file itself dies after the first swap, and os.Lstat of the visible
// file never changes. So this source watches the directories that hold the files,
// treats every event in them as a possible change, and lets the Reloader compare
// content hashes. Every read takes all files from one "..data" generation of their
// directory, so the certificate, key and CA bundle of one Secret volume are always of
// one update. A watch that cannot be set up (no inotify, directory deleted)
// is retried every re-watch interval, and the Reloader's poll re-reads the files
// regardless, so a missed event delays a reload but never loses it.
//
// [Set] is the same mechanism for any content kept in files: package jwtkeys/jwtfile
// reads JWT key directories with it.
package file
