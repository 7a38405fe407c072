// Package crds pins cert-manager's module, whose CustomResourceDefinitions
// (deploy/crds) hack/build-trust-manager.sh installs into .bin for the tests
// that validate cert-manager objects (the webhook's Issuer and Certificate)
// against the real API. cert-manager's controller is not buildable from the
// Go module proxy; its API module is.
package crds

import _ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
