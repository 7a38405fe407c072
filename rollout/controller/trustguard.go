package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
)

// Trust guard reasons (the metric's reason label of a trust deferral). Object
// names are in the Event, never in a label.
const (
	// reasonUntrustedLeaf: the workload consumes a server certificate Secret
	// whose new leaf a bundle it is declared trusted by does not trust.
	reasonUntrustedLeaf reason = "untrusted_leaf"
	// reasonDroppedIssuer: the workload consumes a bundle that no longer
	// trusts the current leaf of a server certificate Secret declared trusted
	// by it.
	reasonDroppedIssuer reason = "dropped_issuer"
)

// trustConflict is one declared server Secret / bundle pair that does not
// verify.
type trustConflict struct {
	reason reason
	detail string
}

// trustGuard checks the declarations of rollout.AnnotationTrustedBy that
// concern w, in w's namespace: for every server Secret w consumes (tls.crt),
// its leaf against every bundle it declares; for every bundle key w consumes,
// the current leaf of every Secret declaring it. It reads the objects
// involved with uncached GETs (and lists Secrets' metadata once) only when a
// change is pending, and keeps none of their data.
func (r *reconciler) trustGuard(ctx context.Context, w *workload) ([]trustConflict, error) {
	ns := w.obj.GetNamespace()
	g := &guardReads{r: r, ctx: ctx, ns: ns, data: map[clusterview.Key]map[string][]byte{}}
	var out []trustConflict
	seen := map[string]bool{}
	check := func(server string, b trustRef, why reason) error {
		pair := server + "|" + b.String()
		if seen[pair] {
			return nil
		}
		seen[pair] = true
		sd, err := g.get(rollout.KindSecret, server)
		if err != nil || sd == nil || len(sd[corev1.TLSCertKey]) == 0 {
			return err
		}
		bd, err := g.get(b.Kind, b.Name)
		if err != nil {
			return err
		}
		bundle := hotcert.Input{Name: fmt.Sprintf("%s %s/%s key %s", b.Kind, ns, b.Name, b.Key)}
		if bd != nil {
			bundle.Data = bd[b.Key]
		}
		if len(bundle.Data) == 0 {
			out = append(out, trustConflict{why, fmt.Sprintf("Secret %s/%s is declared trusted by %s, which is missing or empty", ns, server, bundle.Name)})
			return nil
		}
		chain := hotcert.Input{Name: "Secret " + ns + "/" + server, Data: sd[corev1.TLSCertKey]}
		if err := rollout.CheckTrust(chain, bundle, w.now); err != nil {
			out = append(out, trustConflict{why, err.Error()})
		}
		return nil
	}
	for _, ref := range w.refs {
		if strings.Contains(ref.Name, ":") {
			continue // the guard is declared within one namespace
		}
		// Server side: w consumes a server certificate Secret.
		if ref.Kind == rollout.KindSecret && consumesKey(ref, corev1.TLSCertKey) {
			ann, err := g.annotations(ref.Name)
			if err != nil {
				return nil, err
			}
			if v, ok := ann[rollout.AnnotationTrustedBy]; ok {
				bundles, err := parseTrustedBy(v)
				if err != nil {
					r.report.warnAnnotation(w.obj, w.key, fmt.Errorf("Secret %s/%s: %w", ns, ref.Name, err))
				}
				for _, b := range bundles {
					if err := check(ref.Name, b, reasonUntrustedLeaf); err != nil {
						return nil, err
					}
				}
			}
		}
		// Client side: w consumes a bundle some server Secret declares.
		decl, err := g.declarations()
		if err != nil {
			return nil, err
		}
		for _, d := range decl {
			for _, b := range d.bundles {
				if b.Kind == ref.Kind && b.Name == ref.Name && consumesKey(ref, b.Key) && d.secret != ref.Name {
					if err := check(d.secret, b, reasonDroppedIssuer); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return out, nil
}

func consumesKey(ref rollout.Ref, key string) bool {
	return ref.All || slices.ContainsFunc(ref.Keys, func(k rollout.KeyRef) bool { return k.Key == key })
}

// guardReads reads, once per reconcile, what the trust guard needs.
type guardReads struct {
	r    *reconciler
	ctx  context.Context
	ns   string
	data map[clusterview.Key]map[string][]byte
	meta map[string]map[string]string // Secret name → annotations
	decl []declaration
}

type declaration struct {
	secret  string
	bundles []trustRef
}

func (g *guardReads) list() error {
	if g.meta != nil {
		return nil
	}
	g.meta = map[string]map[string]string{}
	items, err := g.trustedBy()
	if err != nil {
		return err
	}
	for _, s := range items {
		g.meta[s.Name] = s.Annotations
		if v, ok := s.Annotations[rollout.AnnotationTrustedBy]; ok {
			if b, err := parseTrustedBy(v); err == nil {
				g.decl = append(g.decl, declaration{secret: s.Name, bundles: b})
			}
		}
	}
	return nil
}

// trustedBy returns the Secrets of the namespace that may declare trust: as
// the controller's watch keeps their declarations (no request), or else
// listed (metadata).
func (g *guardReads) trustedBy() ([]metav1.PartialObjectMetadata, error) {
	if m, ok := g.r.store.TrustedBy(g.ns); ok {
		out := make([]metav1.PartialObjectMetadata, 0, len(m))
		for name, v := range m {
			out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{rollout.AnnotationTrustedBy: v}}})
		}
		slices.SortFunc(out, func(a, b metav1.PartialObjectMetadata) int { return strings.Compare(a.Name, b.Name) }) // as a list is
		return out, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := g.r.api.List(g.ctx, list, client.InNamespace(g.ns)); err != nil {
		return nil, fmt.Errorf("listing the Secrets of %s for the trust guard: %w", g.ns, err)
	}
	return list.Items, nil
}

func (g *guardReads) annotations(secret string) (map[string]string, error) {
	if err := g.list(); err != nil {
		return nil, err
	}
	return g.meta[secret], nil
}

func (g *guardReads) declarations() ([]declaration, error) {
	if err := g.list(); err != nil {
		return nil, err
	}
	return g.decl, nil
}

// get returns the data of an object (nil when it does not exist).
func (g *guardReads) get(kind rollout.Kind, name string) (map[string][]byte, error) {
	k := clusterview.Key{Kind: kind, Namespace: g.ns, Name: name}
	if d, ok := g.data[k]; ok {
		return d, nil
	}
	obj := clusterview.NewObject(kind)
	var d map[string][]byte
	g.r.report.metrics.reads.WithLabelValues(string(kind)).Inc()
	if err := g.r.api.Get(g.ctx, client.ObjectKey{Namespace: g.ns, Name: name}, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading %s %s/%s for the trust guard: %w", kind, g.ns, name, err)
		}
	} else {
		switch o := obj.(type) {
		case *corev1.Secret:
			d = o.Data
		case *corev1.ConfigMap:
			d = make(map[string][]byte, len(o.Data)+len(o.BinaryData))
			for k, v := range o.Data {
				d[k] = []byte(v)
			}
			for k, v := range o.BinaryData {
				d[k] = v
			}
		}
	}
	g.data[k] = d
	return d, nil
}

// deferUntilTrusted defers a change the trust guard refuses for now: the
// other side (the bundle, or the server Secret) may catch up, so the check is
// repeated every TrustRecheck, and the change rolls as soon as it passes.
func (r *reconciler) deferUntilTrusted(w *workload, what string, conflicts []trustConflict) reconcile.Result {
	var parts []string
	for _, c := range conflicts {
		if !slices.Contains(parts, c.detail) {
			parts = append(parts, c.detail)
		}
	}
	wait := "waiting for the bundle to trust the new leaf's issuer"
	if conflicts[0].reason == reasonDroppedIssuer {
		wait = "waiting for the server Secret to hold a leaf the new bundle trusts"
	}
	note := fmt.Sprintf("%s; trust guard: %s; %s (rechecking every %s), the running pods keep their current configuration", what, strings.Join(parts, "; "), wait, r.opts.TrustRecheck)
	r.report.report(w.obj, r.kind.name, w.key, outcome{
		sig: "trust/" + w.cfg.Hash + "/" + note, result: resultDeferred, reason: conflicts[0].reason, event: eventDeferred, warning: true,
		note: note,
	})
	return reconcile.Result{RequeueAfter: r.opts.TrustRecheck}
}

// trustRef is one bundle named by rollout.AnnotationTrustedBy.
type trustRef struct {
	Kind rollout.Kind
	Name string
	Key  string
}

func (t trustRef) String() string { return fmt.Sprintf("%s %s key %s", t.Kind, t.Name, t.Key) }

// parseTrustedBy parses the value of rollout.AnnotationTrustedBy.
func parseTrustedBy(value string) ([]trustRef, error) {
	var out []trustRef
	for part := range strings.SplitSeq(value, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "/")
		if len(f) != 3 || f[1] == "" || f[2] == "" || (rollout.Kind(f[0]) != rollout.KindConfigMap && rollout.Kind(f[0]) != rollout.KindSecret) {
			return nil, fmt.Errorf("%s=%q: want Kind/name/key with Kind ConfigMap or Secret, comma-separated", rollout.AnnotationTrustedBy, value)
		}
		out = append(out, trustRef{Kind: rollout.Kind(f[0]), Name: f[1], Key: f[2]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s=%q names no bundle", rollout.AnnotationTrustedBy, value)
	}
	return out, nil
}
