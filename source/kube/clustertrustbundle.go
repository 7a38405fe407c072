package kube

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hotcert/hotcert"
)

// ClusterTrustBundles is a trust source that follows ClusterTrustBundles
// (certificates.k8s.io/v1) through the API: one bundle by name, or every bundle of a
// signer whose labels match a selector, unioned as the kubelet's clusterTrustBundle
// projected volume unions them (every certificate of every matching bundle, each
// once). Create it with [NewClusterTrustBundle] or [NewClusterTrustBundlesForSigner];
// combine it with an identity source with hotcert.Compose.
//
// Its informer is restricted by a field selector (metadata.name, or
// spec.signerName) and the label selector, so it caches only the bundles it uses.
// Every bundle must follow hotcert's PEM grammar: a bundle whose second certificate
// is cut — which the API server's own check lets through, as it skips a block it
// cannot decode — is refused as a whole, naming the bundle, and the last good trust
// keeps serving. A deleted bundle (or no bundle left matching) keeps the last good
// trust too, and is reported once. A lost watch, and reads the API server refuses
// for a moment, are handled as for [Keys].
type ClusterTrustBundles struct {
	client   kubernetes.Interface
	name     string          // one bundle by name, or
	signer   string          // every bundle of this signer
	selector labels.Selector // whose labels match
	informer *follower
	grace    *grace[[]*certificatesv1.ClusterTrustBundle]
}

var (
	_ hotcert.Source       = (*ClusterTrustBundles)(nil)
	_ hotcert.SourceLogger = (*ClusterTrustBundles)(nil)
)

// NewClusterTrustBundle returns a trust source for the ClusterTrustBundle name.
// [WithResync], [WithLogger] and [WithRefusalGrace] apply.
func NewClusterTrustBundle(client kubernetes.Interface, name string, opts ...Option) *ClusterTrustBundles {
	return newClusterTrustBundles(client, name, "", labels.Everything(), opts)
}

// NewClusterTrustBundlesForSigner returns a trust source for the union of every
// ClusterTrustBundle whose spec.signerName is signerName and whose labels match
// selector (nil or labels.Everything() for all of the signer's bundles), as a
// clusterTrustBundle projection with signerName and labelSelector does. No bundle
// matching is a failure (reason missing). [WithResync], [WithLogger] and [WithRefusalGrace] apply.
func NewClusterTrustBundlesForSigner(client kubernetes.Interface, signerName string, selector labels.Selector, opts ...Option) *ClusterTrustBundles {
	if selector == nil {
		selector = labels.Everything()
	}
	return newClusterTrustBundles(client, "", signerName, selector, opts)
}

func newClusterTrustBundles(client kubernetes.Interface, name, signer string, selector labels.Selector, opts []Option) *ClusterTrustBundles {
	c := defaults()
	for _, o := range opts {
		o.apply(&c)
	}
	s := &ClusterTrustBundles{client: client, name: name, signer: signer, selector: selector}
	s.informer = &follower{what: s.String(), resync: c.resync, logger: c.logger, example: &certificatesv1.ClusterTrustBundle{},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CertificatesV1().ClusterTrustBundles().List(ctx, s.listOptions(o))
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CertificatesV1().ClusterTrustBundles().Watch(ctx, s.listOptions(o))
		},
	}
	s.grace = newGrace[[]*certificatesv1.ClusterTrustBundle](c, s.informer.poke)
	return s
}

// listOptions restricts o to the bundles of s.
func (s *ClusterTrustBundles) listOptions(o metav1.ListOptions) metav1.ListOptions {
	if s.name != "" {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.name).String()
		return o
	}
	o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", s.signer).String()
	o.LabelSelector = s.selector.String()
	return o
}

// String names the bundles, e.g. "ClusterTrustBundle example.com:serving:v1" or
// "ClusterTrustBundles of signer example.com/serving with labels env=prod".
func (s *ClusterTrustBundles) String() string {
	if s.name != "" {
		return "ClusterTrustBundle " + s.name
	}
	sel := s.selector.String()
	if sel == "" {
		sel = "any"
	}
	return fmt.Sprintf("ClusterTrustBundles of signer %s with labels %s", s.signer, sel)
}

// Read implements [hotcert.Source]: the trust bundle is the union of the bundles'
// certificates, each once, in the order of the bundles' names and of the
// certificates within them. The content has no identity.
func (s *ClusterTrustBundles) Read(ctx context.Context) (hotcert.Content, error) {
	bundles, err := s.current(ctx)
	if err != nil {
		return hotcert.Content{}, err
	}
	if len(bundles) == 0 {
		if s.name != "" {
			return hotcert.Content{}, &hotcert.Error{Input: s.String(), Reason: hotcert.ReasonMissing, Detail: "does not exist"}
		}
		return hotcert.Content{}, &hotcert.Error{Input: s.String(), Reason: hotcert.ReasonMissing, Detail: "match no ClusterTrustBundle"}
	}
	slices.SortFunc(bundles, func(a, b *certificatesv1.ClusterTrustBundle) int { return strings.Compare(a.Name, b.Name) })
	var union []byte
	seen := map[string]bool{}
	for _, b := range bundles {
		in := hotcert.Input{Name: "ClusterTrustBundle " + b.Name, Data: []byte(b.Spec.TrustBundle)}
		certs, err := hotcert.ParseCertificates(in)
		if err != nil {
			return hotcert.Content{}, err
		}
		for _, c := range certs {
			if !seen[string(c.Raw)] {
				seen[string(c.Raw)] = true
				union = append(union, hotcert.EncodeCertificates(c)...)
			}
		}
	}
	name := s.String()
	if len(bundles) > 1 || s.name == "" {
		name += " (" + bundleNames(bundles) + ")"
	}
	return hotcert.Content{CA: hotcert.Input{Name: name, Data: union}, Source: s.String()}, nil
}

// Watch implements [hotcert.Source]: an informer on exactly the selected bundles.
func (s *ClusterTrustBundles) Watch(ctx context.Context, changed func()) error {
	return s.informer.run(ctx, changed)
}

// SetDefaultLogger implements hotcert.SourceLogger: a Reloader hands the source its
// logger, which says when the watch is lost and when it is back, unless
// [WithLogger] gave one.
func (s *ClusterTrustBundles) SetDefaultLogger(l *slog.Logger) { s.informer.setDefaultLogger(l) }

// current returns the selected bundles from the cache while the informer follows
// them, and from the API server otherwise; a read the API server refuses or does
// not answer returns the last answer for the refusal grace (see [Keys]).
func (s *ClusterTrustBundles) current(ctx context.Context) ([]*certificatesv1.ClusterTrustBundle, error) {
	bundles, err := s.fetch(ctx)
	if ctx.Err() != nil {
		return bundles, err
	}
	return s.grace.read(bundles, err)
}

// fetch is current without the grace.
func (s *ClusterTrustBundles) fetch(ctx context.Context) ([]*certificatesv1.ClusterTrustBundle, error) {
	if st := s.informer.cached(); st != nil {
		var out []*certificatesv1.ClusterTrustBundle
		for _, obj := range st.List() {
			out = append(out, obj.(*certificatesv1.ClusterTrustBundle))
		}
		return out, nil
	}
	out, err := s.get(ctx)
	if err != nil {
		return nil, readError(s.String(), s.informer.lost(), err)
	}
	if st := s.informer.catchingUp(); st != nil && holdsAll(st, out) {
		s.informer.caughtUp()
	}
	return out, nil
}

// get reads the selected bundles from the API server (none for a bundle by name
// that does not exist).
func (s *ClusterTrustBundles) get(ctx context.Context) ([]*certificatesv1.ClusterTrustBundle, error) {
	api := s.client.CertificatesV1().ClusterTrustBundles()
	if s.name != "" {
		b, err := api.Get(ctx, s.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return []*certificatesv1.ClusterTrustBundle{b}, nil
	}
	list, err := api.List(ctx, s.listOptions(metav1.ListOptions{}))
	if err != nil {
		return nil, err
	}
	out := make([]*certificatesv1.ClusterTrustBundle, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// holdsAll reports whether the cache st holds exactly the bundles the API server
// answered, each at the same resourceVersion.
func holdsAll(st cache.Store, got []*certificatesv1.ClusterTrustBundle) bool {
	cached := st.List()
	if len(cached) != len(got) {
		return false
	}
	for _, b := range got {
		c, exists, err := st.GetByKey(b.Name)
		if err != nil || !exists || !sameVersion(c, b) {
			return false
		}
	}
	return true
}

func bundleNames(bundles []*certificatesv1.ClusterTrustBundle) string {
	var b bytes.Buffer
	for i, x := range bundles {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x.Name)
	}
	return b.String()
}
