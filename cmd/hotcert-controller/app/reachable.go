package app

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// probeTimeout bounds the first request to the API server.
const probeTimeout = 15 * time.Second

// reachable asks the API server its version, so that a cluster that cannot be
// reached is said first and plainly ("the API server at URL (kubeconfig context
// C) cannot be reached: …"), not as the manager's first failure to discover a
// kind. An answer of any status (401, 403) is reachable: what follows reports it.
func reachable(rc *rest.Config, from string) error {
	c := rest.CopyConfig(rc)
	if c.Timeout == 0 || c.Timeout > probeTimeout {
		c.Timeout = probeTimeout
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return fmt.Errorf("the API server at %s (%s): %w", rc.Host, from, err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil
		}
		return fmt.Errorf("the API server at %s (%s) cannot be reached: %w", rc.Host, from, err)
	}
	return nil
}
