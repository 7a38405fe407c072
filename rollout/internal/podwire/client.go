package podwire

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// NewPodsClient is the census's client of the pods: the protobuf
// encoding, as kube-controller-manager lists and watches pods (a list of
// 10,000 decodes in a fraction of the JSON's time and garbage), and each
// Pod decoded by Decode, into the fields a record reads. Anything else
// (a PodList, a Status, another encoding) is decoded as client-go decodes
// it. cfg is copied.
func NewPodsClient(cfg *rest.Config, hc *http.Client) (corev1client.PodsGetter, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType, c.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON
	c.GroupVersion, c.APIPath = &corev1.SchemeGroupVersion, "/api"
	c.NegotiatedSerializer = newPodCodecs(scheme.Codecs.WithoutConversion())
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("podwire: the client of the pods: %w", err)
	}
	return corev1client.New(rc), nil
}

// podCodecs is a negotiated serializer whose protobuf decoder decodes a Pod
// with Decode.
type podCodecs struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newPodCodecs(ns runtime.NegotiatedSerializer) podCodecs {
	infos := slices.Clone(ns.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = podDecoding{infos[i].Serializer}
		}
	}
	return podCodecs{NegotiatedSerializer: ns, infos: infos}
}

func (c podCodecs) SupportedMediaTypes() []runtime.SerializerInfo { return c.infos }

// podDecoding is the protobuf serializer, but for the decoding of a Pod.
type podDecoding struct{ runtime.Serializer }

// protobufPrefix begins every object the API server encodes as protobuf,
// before its runtime.Unknown envelope (apimachinery's protobuf serializer
// keeps its own copy, protoEncodingPrefix, unexported).
var protobufPrefix = []byte("k8s\x00")

var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

func (d podDecoding) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	p, isPod := into.(*corev1.Pod)
	raw, ok := podBytes(data)
	if !ok || into != nil && !isPod {
		return d.Serializer.Decode(data, defaults, into)
	}
	if p == nil {
		p = &corev1.Pod{}
	} else {
		*p = corev1.Pod{}
	}
	if err := Decode(raw, p); err != nil {
		return nil, nil, err
	}
	gvk := podKind
	return p, &gvk, nil
}

// podBytes is the encoding of the Pod that data holds, when it holds one:
// data is an object as the API server encodes it as protobuf, and its
// envelope (a runtime.Unknown) says it is a v1 Pod, not compressed.
func podBytes(data []byte) ([]byte, bool) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return nil, false
	}
	var v1, pod, plain = false, false, true
	var raw []byte
	err := eachField(data[len(protobufPrefix):], "Unknown", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			return eachField(v, "TypeMeta", func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case 1:
					v1 = string(v) == "v1"
				case 2:
					pod = string(v) == "Pod"
				}
				return nil
			})
		case 2:
			raw = v
		case 3:
			plain = len(v) == 0
		}
		return nil
	})
	return raw, err == nil && v1 && pod && plain
}
