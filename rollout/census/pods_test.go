package census

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	core "github.com/hotcert/hotcert/rollout/internal/census"
	"github.com/hotcert/hotcert/rollout/internal/podwire"
)

// replicaPod is pod i of a ReplicaSet as the API server stores it: with the
// service account token volume it adds (its name ends in letters of its
// own), an emptyDir, an env value, a sidecar and an init container that
// exits, and every way of consuming an object the census judges.
func replicaPod(i int) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	token := fmt.Sprintf("kube-api-access-%05x", i)
	started := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, i%60, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("app-7d9f-%05d", i), UID: types.UID(fmt.Sprintf("0b1c7e1e-55c9-4a4e-9d2f-%012x", i)), ResourceVersion: fmt.Sprint(100 + i),
			Labels:        map[string]string{"app": "app", "pod-template-hash": "7d9f"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-01T10:00:00Z"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("node-%d", i%7),
			Volumes: []corev1.Volume{
				{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "bundles", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/agents"), Path: "agents.pem",
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"trust": "agents"}}}},
					{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/agents", KeyType: "ECDSAP256", CredentialBundlePath: "cred.pem"}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
				}}}},
				{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			InitContainers: []corev1.Container{
				{Name: "migrate", Image: "registry.invalid/migrate:1", VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca"}}},
				{Name: "proxy", Image: "registry.invalid/proxy:1", RestartPolicy: &always, VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/tls"}}},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.invalid/app:1", Args: []string{"--serve"},
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{{Name: "MODE", Value: "secret-value"},
					{Name: "CA", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Key: "ca.crt"}}}},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "ca", MountPath: "/etc/ca", ReadOnly: true},
					{Name: "ca", MountPath: "/etc/ssl/ca.crt", SubPath: "ca.crt"},
					{Name: "scratch", MountPath: "/tmp"},
					{Name: "bundles", MountPath: "/var/run/bundles"},
					{Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
				},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.%d.%d", i/250, i%250),
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "migrate", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:1", ImageID: "sha256:0",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}},
	}
}

// censusObjects is every object replicaPod consumes, and one it does not.
var censusObjects = []core.Object{
	{Kind: core.KindConfigMap, Namespace: "team-a", Name: "ca", Key: "ca.crt"},
	{Kind: core.KindSecret, Namespace: "team-a", Name: "tls", Key: "tls.crt", Role: core.RoleServer},
	{Kind: core.KindConfigMap, Namespace: "team-a", Name: "kube-root-ca.crt", Key: "ca.crt"},
	{Kind: core.KindClusterTrustBundle, SignerName: "example.com/agents", Selector: "trust=agents"}, // the projection's own selection
	{Kind: core.KindConfigMap, Namespace: "team-b", Name: "ca", Key: "ca.crt"},
}

// TestPodRecordsKeepWhatTheCensusJudges: the census judges a pod's record
// exactly as it would judge the whole Pod — every use, how, by which
// container, every start time, its IP and container ports — and the record
// keeps no env value.
func TestPodRecordsKeepWhatTheCensusJudges(t *testing.T) {
	rs := newRecords()
	for i := range 3 {
		p := replicaPod(i)
		want, ok := core.PodOf(p, censusObjects)
		if !ok || len(want.Uses) != 4 {
			t.Fatalf("the whole pod's uses %+v", want.Uses)
		}
		r := rs.record(p)
		var got corev1.Pod
		r.fill(&got)
		gotPod, _ := core.PodOf(&got, censusObjects)
		if !reflect.DeepEqual(gotPod, want) {
			t.Fatalf("pod %d: the record is judged\n%+v\nthe pod\n%+v", i, gotPod, want)
		}
		if ip, ok := r.ip.addr(); !ok || ip.String() != p.Status.PodIP || r.gone {
			t.Fatalf("pod %d: IP %v (%v), gone %v", i, ip, ok, r.gone)
		}
		// The key of a UUID is its 16 bytes, as its hex digits spell them.
		if b, err := hex.DecodeString(strings.ReplaceAll(string(p.UID), "-", "")); err != nil || r.uid != podUID(b) {
			t.Fatalf("pod %d: UID key %x, want the bytes of %s", i, r.uid, p.UID)
		}
		if c, port, ok := containerPort(r.spec, "metrics"); !ok || c != "app" || port != 9090 {
			t.Fatalf("container port: %q %d %v", c, port, ok)
		}
		if len(got.Status.InitContainerStatuses) != 1 || got.Status.InitContainerStatuses[0].Name != "proxy" {
			t.Fatalf("sidecar statuses %+v", got.Status.InitContainerStatuses)
		}
		for _, c := range r.spec.Containers {
			for _, e := range c.Env {
				if e.Value != "" {
					t.Fatalf("the record keeps env %s's value", e.Name)
				}
			}
		}
	}
	gone := replicaPod(9)
	gone.Status.Phase = corev1.PodSucceeded
	if !rs.record(gone).gone {
		t.Fatal("a Succeeded pod is not gone")
	}
	gone = replicaPod(9)
	gone.DeletionTimestamp = ptr.To(metav1.Now())
	if !rs.record(gone).gone {
		t.Fatal("a pod being deleted is not gone")
	}
}

// TestPodRecordsOfDecodedPods: the record of a Pod as the census's client
// decodes it (podwire.Decode, of its protobuf encoding) is the record of the
// whole Pod, its shape the same interned one.
func TestPodRecordsOfDecodedPods(t *testing.T) {
	rs := newRecords()
	deleted := replicaPod(3)
	deleted.DeletionTimestamp = ptr.To(metav1.Now())
	for i, p := range []*corev1.Pod{replicaPod(0), replicaPod(1), deleted} {
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var decoded corev1.Pod
		if err := podwire.Decode(b, &decoded); err != nil {
			t.Fatal(err)
		}
		if got, want := rs.record(&decoded), rs.record(p); !reflect.DeepEqual(got, want) || got.podShape != want.podShape {
			t.Fatalf("pod %d: record %+v, want the whole Pod's %+v", i, got, want)
		}
	}
}

// TestPodRecordsShareWhatPodsHaveAlike: the pods of one ReplicaSet share one
// reduced spec and one label set, although each has a token volume of its
// own name; a pod of another spec gets another. The table holds its copies
// weakly: once no record holds them, they leave it.
func TestPodRecordsShareWhatPodsHaveAlike(t *testing.T) {
	rs := newRecords()
	var records []*podRecord
	for i := range 100 {
		records = append(records, rs.record(replicaPod(i)))
	}
	for _, r := range records[1:] {
		if r.spec != records[0].spec || r.labels != records[0].labels || r.namespace != records[0].namespace {
			t.Fatalf("%s holds a spec or labels of its own", r.name)
		}
	}
	other := replicaPod(0)
	other.Spec.Containers[0].VolumeMounts[1].SubPath = "other.crt"
	if rs.record(other).spec == records[0].spec {
		t.Fatal("a pod of another spec shares the ReplicaSet's")
	}
	if n := rs.specs.len(); n != 2 {
		t.Fatalf("%d specs in the table, want 2", n)
	}
	records = nil
	for range 100 {
		runtime.GC()
		if rs.specs.len() == 0 && rs.labels.len() == 0 {
			return
		}
		time.Sleep(time.Millisecond) // the cleanups run on their own goroutine
	}
	t.Fatalf("%d specs and %d label sets left in the table once no record holds them", rs.specs.len(), rs.labels.len())
}

// BenchmarkPodRecords reports the heap that 10,000 pods of one ReplicaSet
// keep as records, and with their entries in the index: all the census
// keeps of them.
func BenchmarkPodRecords(b *testing.B) {
	const n = 10000
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = replicaPod(i)
	}
	for b.Loop() {
		rs := newRecords()
		before := liveHeap()
		records := make([]*podRecord, n)
		for i, p := range pods {
			records[i] = rs.record(p)
		}
		b.ReportMetric(float64(liveHeap()-before)/n, "B/pod-record")
		ix := newPodIndex()
		for _, r := range records {
			ix.put(r)
		}
		b.ReportMetric(float64(liveHeap()-before)/n, "B/pod-indexed")
		runtime.KeepAlive(records)
		runtime.KeepAlive(ix)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
