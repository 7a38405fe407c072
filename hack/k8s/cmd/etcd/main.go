// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3), at
// the version Kubernetes v1.37.2 uses, built from the Go module proxy by
// hack/build-k8s.sh for hotcert's tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
