package census

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
	"github.com/hotcert/hotcert/rollout/internal/census/evidence"
)

// listPods lists, from the pod index, the records of the running pods that
// may consume objects: those of the objects' namespaces, or of every
// namespace when a ClusterTrustBundle is among them; of the namespaces in
// scope only.
func listPods(pods *podIndex, objects []core.State, sc scope) []*podRecord {
	namespaces := map[string]bool{}
	for _, o := range objects {
		if o.Namespace == "" {
			namespaces = map[string]bool{"": true}
			break
		}
		namespaces[o.Namespace] = true
	}
	n := 0 // at most the records of those namespaces: one allocation, not a growing slice's
	for ns := range namespaces {
		if ns == "" || sc.contains(ns) {
			n += pods.lenOf(ns)
		}
	}
	records := make([]*podRecord, 0, n)
	for ns := range namespaces {
		if ns != "" && !sc.contains(ns) {
			continue
		}
		pods.each(ns, func(r *podRecord) {
			if sc.contains(r.namespace) {
				records = append(records, r)
			}
		})
	}
	return records
}

// batch is the consumers of one batch of pod records: pods[i] is
// records[i]'s, and the pods' Started are slices of starts.
type batch struct {
	pods    []core.Pod
	records []*podRecord
	starts  []core.Start
}

// consumers makes b the pods of records that consume objects, and their
// records (of the same index).
//
// What a pod uses depends on its spec and namespace only (unless a pod
// certificate, which is one pod's own, is among objects), and the pods of a
// ReplicaSet share one reduced spec: their uses are found once and shared
// (read-only), so that a census of 10,000 such pods does not work them out
// 10,000 times.
//
// b's slices are reused: a census passes the batch before, so that it
// allocates them once, not once a batch (they were 0.96 MB of the 1.2 MB a
// census of 10,000 pods allocated). But when kept is true — the census
// keeps the pods past their batch (a driven rotation's consumers, a
// revocation's pods) — their start times are given slices of their own.
func (b *batch) consumers(records []*podRecord, objects []core.Object, kept bool) {
	b.pods, b.records = slices.Grow(b.pods[:0], len(records)), slices.Grow(b.records[:0], len(records))
	if kept {
		b.starts = nil
	}
	b.starts = slices.Grow(b.starts[:0], len(records)) // a container a pod, grown by append for more
	type shape struct {
		spec      *corev1.PodSpec
		namespace string
	}
	var known map[shape][]core.Use // nil: every pod's uses are its own
	if !slices.ContainsFunc(objects, func(o core.Object) bool { return o.Kind == core.KindPodCertificate }) {
		known = map[shape][]core.Use{}
	}
	var p corev1.Pod
	for _, r := range records {
		k := shape{r.spec, r.namespace}
		uses, ok := known[k]
		if !ok {
			r.fill(&p)
			cp, consumes := core.PodOf(&p, objects)
			if uses = cp.Uses; known != nil {
				known[k] = uses
			}
			if !consumes {
				continue
			}
		}
		if len(uses) == 0 {
			continue
		}
		n := len(b.starts)
		b.starts = r.appendStarts(b.starts)
		b.pods = append(b.pods, core.Pod{Namespace: r.namespace, Name: r.name, Labels: r.labelSet(), Started: b.starts[n:len(b.starts):len(b.starts)], Uses: uses})
		b.records = append(b.records, r)
	}
}

// gatherer gathers the evidence of one census, batch by batch (the batch
// it holds).
type gatherer struct {
	c     *Census
	tr    *v1alpha1.TrustRotation
	cache client.Reader
	oldCA side
	newCA side
	batch
	states []core.State

	// What is read once a census, whatever the batches: Prometheus's
	// answer (queried), and each namespace's EndpointSlices.
	queried  bool
	prom     map[string][]core.Report
	promErr  string
	slicesOf map[string][]discoveryv1.EndpointSlice
}

// reports reads what the pods report: from Prometheus when the rotation
// names one (one query a census, whatever the batches), else by scraping
// each consuming pod of the batch (when it names a port). A Prometheus that
// cannot be queried is an error the census states, not a failed reconcile:
// every consumer is then judged without reports.
func (g *gatherer) reports(ctx context.Context) (map[string][]core.Report, string) {
	ev := g.tr.Spec.Evidence
	if p := ev.Prometheus; p != nil {
		if !g.queried {
			q := evidence.Prometheus{URL: p.URL, Client: g.c.opts.prometheusClient(p.URL), NamespaceLabel: p.NamespaceLabel, PodLabel: p.PodLabel,
				ContainerLabel: p.ContainerLabel, Prefix: p.MetricPrefix}
			reps, err := q.Reports(ctx)
			g.queried, g.prom = true, reps
			if err != nil {
				g.prom, g.promErr = nil, err.Error()
			}
		}
		return g.prom, g.promErr
	}
	s := ev.Scrape
	if s == nil {
		return nil, ""
	}
	path := s.Path
	if path == "" {
		path = "/metrics"
	}
	out := map[string][]core.Report{}
	var mu sync.Mutex
	g.each(func(key string, p *podRecord) {
		container, port, ok := containerPort(p.spec, s.Port)
		ip, hasIP := p.ip.addr()
		if !ok || !hasIP {
			return
		}
		url := fmt.Sprintf("http://%s%s", net.JoinHostPort(ip.String(), strconv.Itoa(int(port))), path)
		r, ok, err := evidence.Scrape(ctx, g.c.opts.HTTPClient, url, s.MetricPrefix, container)
		if err != nil || !ok {
			return
		}
		mu.Lock()
		out[key] = append(out[key], r)
		mu.Unlock()
	})
	return out, ""
}

// served dials every ready endpoint of the EndpointSlices that point at a
// pod consuming a server certificate, on the certificate's port.
func (g *gatherer) served(ctx context.Context) map[string][]core.Served {
	type target struct {
		pod      string
		endpoint string
		sc       v1alpha1.ServerCertificate
	}
	var targets []target
	servers := map[string][]v1alpha1.ServerCertificate{} // pod key -> the certificates it serves
	namespaces := map[string]bool{}                      // of the pods that serve one
	for _, p := range g.pods {
		for _, u := range p.Uses {
			if o := g.states[u.Object]; o.Role == core.RoleServer {
				sc := g.tr.Spec.ServerCertificates[o.Origin]
				if !slices.Contains(servers[p.Key()], sc) {
					servers[p.Key()] = append(servers[p.Key()], sc)
				}
				namespaces[p.Namespace] = true
			}
		}
	}
	for ns := range namespaces {
		for _, s := range g.endpointSlices(ctx, ns) {
			for _, e := range s.Endpoints {
				if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
					continue
				}
				key := ns + "/" + e.TargetRef.Name
				for _, sc := range servers[key] {
					for _, port := range s.Ports {
						if port.Port == nil || (sc.Port != "" && sc.Port != deref(port.Name) && sc.Port != strconv.Itoa(int(*port.Port))) {
							continue
						}
						for _, a := range e.Addresses {
							targets = append(targets, target{pod: key, endpoint: net.JoinHostPort(a, strconv.Itoa(int(*port.Port))), sc: sc})
						}
					}
				}
			}
		}
	}
	out := map[string][]core.Served{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, g.c.opts.Concurrency)
	for _, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			h := evidence.Handshaker{Old: g.oldCA.certs, New: g.newCA.certs, ServerName: t.sc.ServerName, Timeout: g.c.opts.HandshakeTimeout}
			s := h.Served(ctx, t.endpoint)
			mu.Lock()
			out[t.pod] = append(out[t.pod], s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// endpointSlices lists the EndpointSlices of namespace ns, once a census
// (none when they cannot be listed).
func (g *gatherer) endpointSlices(ctx context.Context, ns string) []discoveryv1.EndpointSlice {
	if s, ok := g.slicesOf[ns]; ok {
		return s
	}
	if g.slicesOf == nil {
		g.slicesOf = map[string][]discoveryv1.EndpointSlice{}
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := g.cache.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil // not kept: the next batch tries again
	}
	g.slicesOf[ns] = list.Items
	return list.Items
}

// each runs f for every consuming pod of the batch, Concurrency at a time.
func (g *gatherer) each(f func(key string, p *podRecord)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, g.c.opts.Concurrency)
	for i, p := range g.records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(g.pods[i].Key(), p)
		}()
	}
	wg.Wait()
}

// containerPort finds the container port named (or numbered) port.
func containerPort(spec *corev1.PodSpec, port string) (container string, number int32, ok bool) {
	for _, c := range spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == port || strconv.Itoa(int(cp.ContainerPort)) == port {
				return c.Name, cp.ContainerPort, true
			}
		}
	}
	if n, err := strconv.Atoi(port); err == nil && n > 0 && n < 65536 {
		return "", int32(n), true // a port no container declares: its container is not known
	}
	return "", 0, false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
