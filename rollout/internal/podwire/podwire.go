// Package podwire reads the protobuf encoding of a Pod into only the fields
// the census keeps of it (Decode), and builds the census's client of the
// pods, which decodes each Pod so (NewPodsClient).
package podwire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Decode decodes b, the protobuf encoding of a Pod (k8s.io/api's
// generated.proto, without the serializer's envelope), into p: only the
// fields that the census's record of a pod is made of (rollout/census: the
// record and its reduced spec) and those its reflector reads, each as the
// generated Unmarshal sets it; every other field is skipped, its wire
// format checked. Of a Secret, ConfigMap or
// projected volume it reads the whole source, as a reduced spec keeps it,
// but the projections a reduced spec drops (serviceAccountToken,
// downwardAPI); of an env var, its name and its Secret or ConfigMap key
// reference, never its value; of the annotations, only the one that ends a
// streamed list (metav1.InitialEventsAnnotationKey), which the pod feed
// reads of its bookmark.
//
// Why not the generated (*corev1.Pod).Unmarshal: it decodes every field of a
// Pod — managed fields, tolerations, probes, resources, conditions, images
// — into objects that live only until the record is made, and it is code
// (the Unmarshal functions of most of core/v1) that the controller's
// process runs for nothing else: at 10,000 pods the pages of that code were
// 0.77 MiB of what the census added to the process's resident memory
// (docs/census.md, At scale). protowire, the protobuf module's own wire
// reader, does the reading; FuzzDecodePod holds the result to the generated
// decoding.
func Decode(b []byte, p *corev1.Pod) error {
	return eachField(b, "Pod", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			return decodeMeta(v, &p.ObjectMeta)
		case 2:
			return decodeSpec(v, &p.Spec)
		case 3:
			return decodeStatus(v, &p.Status)
		}
		return nil
	})
}

func decodeMeta(b []byte, m *metav1.ObjectMeta) error {
	return eachField(b, "ObjectMeta", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			m.Name = string(v)
		case 3:
			m.Namespace = string(v)
		case 5:
			m.UID = types.UID(v)
		case 6:
			m.ResourceVersion = string(v)
		case 9:
			m.DeletionTimestamp = orNew(m.DeletionTimestamp)
			return m.DeletionTimestamp.Unmarshal(v)
		case 11:
			return mapEntryInto(v, &m.Labels)
		case 12:
			k, val, err := mapEntry(v)
			if err != nil {
				return err
			}
			if k == metav1.InitialEventsAnnotationKey {
				if m.Annotations == nil {
					m.Annotations = map[string]string{}
				}
				m.Annotations[k] = val
			}
		}
		return nil
	})
}

// mapEntryInto sets the entry of a map<string, string> in *m.
func mapEntryInto(b []byte, m *map[string]string) error {
	k, v, err := mapEntry(b)
	if err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
	return nil
}

// mapEntry is the key and value of an entry of a map<string, string>.
func mapEntry(b []byte) (k, v string, err error) {
	err = eachField(b, "map entry", func(num protowire.Number, f []byte, _ uint64) error {
		switch num {
		case 1:
			k = string(f)
		case 2:
			v = string(f)
		}
		return nil
	})
	return k, v, err
}

func decodeSpec(b []byte, s *corev1.PodSpec) error {
	return eachField(b, "PodSpec", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			return appendDecoded(&s.Volumes, v, decodeVolume)
		case 2:
			return appendDecoded(&s.Containers, v, decodeContainer)
		case 20:
			return appendDecoded(&s.InitContainers, v, decodeContainer)
		}
		return nil
	})
}

// decodeVolume keeps of a volume its name and the sources that can carry an
// object the census follows: Secret, ConfigMap and projected.
func decodeVolume(b []byte, vol *corev1.Volume) error {
	return eachField(b, "Volume", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			vol.Name = string(v)
		case 2:
			return eachField(v, "VolumeSource", func(num protowire.Number, v []byte, _ uint64) error {
				src := &vol.VolumeSource
				switch num {
				case 6:
					src.Secret = orNew(src.Secret)
					return decodeSecretVolume(v, src.Secret)
				case 19:
					src.ConfigMap = orNew(src.ConfigMap)
					return decodeConfigMapVolume(v, src.ConfigMap)
				case 26:
					src.Projected = orNew(src.Projected)
					return decodeProjected(v, src.Projected)
				}
				return nil
			})
		}
		return nil
	})
}

func decodeContainer(b []byte, c *corev1.Container) error {
	return eachField(b, "Container", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			c.Name = string(v)
		case 6:
			return appendDecoded(&c.Ports, v, decodePort)
		case 7:
			return appendDecoded(&c.Env, v, decodeEnv)
		case 9:
			return appendDecoded(&c.VolumeMounts, v, decodeMount)
		case 19:
			return appendDecoded(&c.EnvFrom, v, decodeEnvFrom)
		case 24:
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicy(v))
		}
		return nil
	})
}

// decodePort keeps of a container's port its name and number.
func decodePort(b []byte, p *corev1.ContainerPort) error {
	return eachField(b, "ContainerPort", func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			p.Name = string(v)
		case 3:
			p.ContainerPort = int32(x) //nolint:gosec // protobuf's int32: the low 32 bits of its varint, as the generated code reads it
		}
		return nil
	})
}

// decodeMount keeps of a volume mount its volume, path and subPath.
func decodeMount(b []byte, m *corev1.VolumeMount) error {
	return eachField(b, "VolumeMount", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			m.Name = string(v)
		case 3:
			m.MountPath = string(v)
		case 4:
			m.SubPath = string(v)
		case 6:
			m.SubPathExpr = string(v)
		}
		return nil
	})
}

// decodeEnv keeps of an env var its name and its references to a Secret's
// or a ConfigMap's key (never its value: it may be secret).
func decodeEnv(b []byte, e *corev1.EnvVar) error {
	return eachField(b, "EnvVar", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			e.Name = string(v)
		case 3:
			e.ValueFrom = orNew(e.ValueFrom)
			from := e.ValueFrom
			return eachField(v, "EnvVarSource", func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case 3:
					from.ConfigMapKeyRef = orNew(from.ConfigMapKeyRef)
					ref := from.ConfigMapKeyRef
					return decodeKeySelector(v, "ConfigMapKeySelector", &ref.LocalObjectReference, &ref.Key, &ref.Optional)
				case 4:
					from.SecretKeyRef = orNew(from.SecretKeyRef)
					ref := from.SecretKeyRef
					return decodeKeySelector(v, "SecretKeySelector", &ref.LocalObjectReference, &ref.Key, &ref.Optional)
				}
				return nil
			})
		}
		return nil
	})
}

// decodeSecretVolume, decodeConfigMapVolume, decodeProjected and the
// decoders they call read a volume source whole, as a reduced spec keeps it,
// but for the projections it drops (downwardAPI, serviceAccountToken).
func decodeSecretVolume(b []byte, s *corev1.SecretVolumeSource) error {
	return eachField(b, "SecretVolumeSource", func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			s.SecretName = string(v)
		case 2:
			return appendDecoded(&s.Items, v, decodeKeyToPath)
		case 3:
			s.DefaultMode = int32p(x)
		case 4:
			s.Optional = boolp(x)
		case 5:
			s.DefaultUser = int64p(x)
		}
		return nil
	})
}

func decodeConfigMapVolume(b []byte, s *corev1.ConfigMapVolumeSource) error {
	return eachField(b, "ConfigMapVolumeSource", func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			return decodeLocalRef(v, &s.LocalObjectReference)
		case 2:
			return appendDecoded(&s.Items, v, decodeKeyToPath)
		case 3:
			s.DefaultMode = int32p(x)
		case 4:
			s.Optional = boolp(x)
		case 5:
			s.DefaultUser = int64p(x)
		}
		return nil
	})
}

func decodeProjected(b []byte, s *corev1.ProjectedVolumeSource) error {
	return eachField(b, "ProjectedVolumeSource", func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			return appendDecoded(&s.Sources, v, decodeProjection)
		case 2:
			s.DefaultMode = int32p(x)
		case 3:
			s.DefaultUser = int64p(x)
		}
		return nil
	})
}

func decodeProjection(b []byte, s *corev1.VolumeProjection) error {
	return eachField(b, "VolumeProjection", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			s.Secret = orNew(s.Secret)
			return decodeObjectProjection(v, "SecretProjection", &s.Secret.LocalObjectReference, &s.Secret.Items, &s.Secret.Optional)
		case 3:
			s.ConfigMap = orNew(s.ConfigMap)
			return decodeObjectProjection(v, "ConfigMapProjection", &s.ConfigMap.LocalObjectReference, &s.ConfigMap.Items, &s.ConfigMap.Optional)
		case 5:
			s.ClusterTrustBundle = orNew(s.ClusterTrustBundle)
			return decodeTrustBundleProjection(v, s.ClusterTrustBundle)
		case 6:
			s.PodCertificate = orNew(s.PodCertificate)
			return decodePodCertificateProjection(v, s.PodCertificate)
		}
		return nil
	})
}

// decodeObjectProjection reads a SecretProjection or a ConfigMapProjection,
// which are alike.
func decodeObjectProjection(b []byte, msg string, ref *corev1.LocalObjectReference, items *[]corev1.KeyToPath, optional **bool) error {
	return eachField(b, msg, func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			return decodeLocalRef(v, ref)
		case 2:
			return appendDecoded(items, v, decodeKeyToPath)
		case 4:
			*optional = boolp(x)
		}
		return nil
	})
}

func decodeTrustBundleProjection(b []byte, s *corev1.ClusterTrustBundleProjection) error {
	return eachField(b, "ClusterTrustBundleProjection", func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			s.Name = ptr.To(string(v))
		case 2:
			s.SignerName = ptr.To(string(v))
		case 3:
			s.LabelSelector = orNew(s.LabelSelector)
			return decodeLabelSelector(v, s.LabelSelector)
		case 4:
			s.Path = string(v)
		case 5:
			s.Optional = boolp(x)
		case 6:
			s.User = int64p(x)
		}
		return nil
	})
}

func decodeLabelSelector(b []byte, s *metav1.LabelSelector) error {
	return eachField(b, "LabelSelector", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			return mapEntryInto(v, &s.MatchLabels)
		case 2:
			return appendDecoded(&s.MatchExpressions, v, decodeRequirement)
		}
		return nil
	})
}

func decodeRequirement(b []byte, r *metav1.LabelSelectorRequirement) error {
	return eachField(b, "LabelSelectorRequirement", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			r.Key = string(v)
		case 2:
			r.Operator = metav1.LabelSelectorOperator(v)
		case 3:
			r.Values = append(r.Values, string(v))
		}
		return nil
	})
}

func decodePodCertificateProjection(b []byte, s *corev1.PodCertificateProjection) error {
	return eachField(b, "PodCertificateProjection", func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			s.SignerName = string(v)
		case 2:
			s.KeyType = string(v)
		case 3:
			s.MaxExpirationSeconds = int32p(x)
		case 4:
			s.CredentialBundlePath = string(v)
		case 5:
			s.KeyPath = string(v)
		case 6:
			s.CertificateChainPath = string(v)
		case 7:
			return mapEntryInto(v, &s.UserAnnotations)
		case 8:
			s.User = int64p(x)
		}
		return nil
	})
}

func decodeKeyToPath(b []byte, k *corev1.KeyToPath) error {
	return eachField(b, "KeyToPath", func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			k.Key = string(v)
		case 2:
			k.Path = string(v)
		case 3:
			k.Mode = int32p(x)
		case 4:
			k.User = int64p(x)
		}
		return nil
	})
}

func decodeLocalRef(b []byte, r *corev1.LocalObjectReference) error {
	return eachField(b, "LocalObjectReference", func(num protowire.Number, v []byte, _ uint64) error {
		if num == 1 {
			r.Name = string(v)
		}
		return nil
	})
}

func decodeEnvFrom(b []byte, e *corev1.EnvFromSource) error {
	return eachField(b, "EnvFromSource", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			e.Prefix = string(v)
		case 2:
			e.ConfigMapRef = orNew(e.ConfigMapRef)
			return decodeEnvSource(v, "ConfigMapEnvSource", &e.ConfigMapRef.LocalObjectReference, &e.ConfigMapRef.Optional)
		case 3:
			e.SecretRef = orNew(e.SecretRef)
			return decodeEnvSource(v, "SecretEnvSource", &e.SecretRef.LocalObjectReference, &e.SecretRef.Optional)
		}
		return nil
	})
}

// decodeEnvSource reads a ConfigMapEnvSource or a SecretEnvSource.
func decodeEnvSource(b []byte, msg string, ref *corev1.LocalObjectReference, optional **bool) error {
	return eachField(b, msg, func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			return decodeLocalRef(v, ref)
		case 2:
			*optional = boolp(x)
		}
		return nil
	})
}

// decodeKeySelector reads a ConfigMapKeySelector or a SecretKeySelector.
func decodeKeySelector(b []byte, msg string, ref *corev1.LocalObjectReference, key *string, optional **bool) error {
	return eachField(b, msg, func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			return decodeLocalRef(v, ref)
		case 2:
			*key = string(v)
		case 3:
			*optional = boolp(x)
		}
		return nil
	})
}

// appendDecoded appends to *list the message b, decoded by decode: a
// repeated field, as protobuf reads each of its values.
func appendDecoded[T any](list *[]T, b []byte, decode func([]byte, *T) error) error {
	*list = append(*list, *new(T))
	return decode(b, &(*list)[len(*list)-1])
}

// orNew is p, or a new T where p is nil: a message met again is merged
// into, as protobuf reads it.
func orNew[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

// int32p, int64p and boolp are a varint as the generated code reads it into
// an optional field of the type.
func int32p(x uint64) *int32 { return ptr.To(int32(x)) } //nolint:gosec // protobuf's int32: the varint's low 32 bits
func int64p(x uint64) *int64 { return ptr.To(int64(x)) } //nolint:gosec // protobuf's int64: the varint's bits
func boolp(x uint64) *bool   { return ptr.To(x != 0) }

func decodeStatus(b []byte, s *corev1.PodStatus) error {
	return eachField(b, "PodStatus", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			s.Phase = corev1.PodPhase(v)
		case 6:
			s.PodIP = string(v)
		case 8:
			return appendDecoded(&s.ContainerStatuses, v, decodeContainerStatus)
		case 10:
			return appendDecoded(&s.InitContainerStatuses, v, decodeContainerStatus)
		}
		return nil
	})
}

// decodeContainerStatus keeps of a container's status its name and, when it
// runs, since when.
func decodeContainerStatus(b []byte, s *corev1.ContainerStatus) error {
	return eachField(b, "ContainerStatus", func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			s.Name = string(v)
		case 2:
			return eachField(v, "ContainerState", func(num protowire.Number, v []byte, _ uint64) error {
				if num != 2 {
					return nil
				}
				s.State.Running = orNew(s.State.Running)
				run := s.State.Running
				return eachField(v, "ContainerStateRunning", func(num protowire.Number, v []byte, _ uint64) error {
					if num == 1 {
						return run.StartedAt.Unmarshal(v)
					}
					return nil
				})
			})
		}
		return nil
	})
}

// eachField calls f with each field of message b, in order: a length-delimited
// field's bytes (v), a varint's value (x). The fields of every other wire
// type are skipped: none that f reads has one. A field that f reads, sent
// with the other of the two types, reads as empty, where the generated code
// fails (the API server sends none); what is malformed is an error.
func eachField(b []byte, msg string, f func(num protowire.Number, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("podwire: decoding a %s: %w", msg, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("podwire: decoding field %d of a %s: %w", num, msg, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue
		}
		if err := f(num, v, x); err != nil {
			return err
		}
	}
	return nil
}
