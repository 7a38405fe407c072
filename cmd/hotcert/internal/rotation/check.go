// Package rotation says where a CA rotation with a union bundle stands and whether
// its next step is safe, naming the stragglers. It looks at what each control plane
// replica serves, with a real TLS handshake as an agent does (package inspect), and
// at what the fleet trusts, from each replica's fleet view (the trust reports its
// agents send over their streams, on its status endpoint). It backs `hotcert
// rotation status`.
//
// Replicas are given by address: this package, like the hotcert binary, links no
// Kubernetes client, so it cannot discover them.
package rotation

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// Check looks at every replica once and returns the verdict on each step. An error
// means bad input (no replica, a CA file that does not load); an unreachable replica
// is part of the report, as a straggler.
func Check(ctx context.Context, o Options) (*Report, error) {
	return check(ctx, o, nil)
}

// check is Check, merging in what mem remembers of earlier looks (nil: nothing).
func check(ctx context.Context, o Options, mem *memory) (*Report, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	oldCAs, err := loadCAs(ctx, o.OldCAFile)
	if err != nil {
		return nil, err
	}
	newCAs, err := loadCAs(ctx, o.NewCAFile)
	if err != nil {
		return nil, err
	}
	bundle, err := union(oldCAs, newCAs)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		OldCA:     CA{Name: oldCAs.name, File: o.OldCAFile, SHA256: slices.Sorted(maps.Keys(oldCAs.fps))},
		NewCA:     CA{Name: newCAs.name, File: o.NewCAFile, SHA256: slices.Sorted(maps.Keys(newCAs.fps))},
		Replicas:  make([]ReplicaReport, len(o.Replicas)),
		CheckedAt: time.Now().UTC(),
	}
	var wg sync.WaitGroup
	for i, r := range o.Replicas {
		wg.Go(func() { rep.Replicas[i] = probe(ctx, o, r, bundle, oldCAs, newCAs) })
	}
	wg.Wait()
	judge(rep, oldCAs, newCAs, o.MinAgents, mem)
	return rep, nil
}
