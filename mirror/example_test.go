package mirror_test

import (
	"context"
	"log"
	"log/slog"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/mirror"
	"github.com/hotcert/hotcert/source/file"
)

// A Reloader of a mounted Secret, mirrored into a directory a JVM program
// watches: PEM files, and a PKCS#12 keystore and truststore with the password
// of another mounted Secret.
func Example() {
	ctx := context.Background()
	src, err := file.New(file.WithKeyPair("/etc/tls/tls.crt", "/etc/tls/tls.key"), file.WithCA("/etc/tls/ca.crt"))
	if err != nil {
		log.Fatal(err)
	}
	r, err := hotcert.New(ctx, src, hotcert.WithComponent("mirror"), hotcert.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err) // bad or missing files at startup
	}
	go r.Start(ctx)
	m, err := mirror.New(ctx, r, "/mirror", mirror.WithPKCS12("/etc/keystore-password/password"),
		hotcert.WithComponent("mirror"), hotcert.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err) // no password, or the directory is not writable
	}
	log.Fatal(m.Start(ctx)) // /mirror follows every validated change
}
