package deploy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/internal/kubetest"
)

// TestMirrorExampleIsAccepted: examples/mirror/deployment.yaml is accepted by
// the API server as written, and the pods its ReplicaSet creates keep the
// mirror as a native sidecar (an init container with restartPolicy Always) that
// shares the emptyDir with the program and holds the program back with a
// startup probe; the Deployment is not one the rollout controller rolls.
func TestMirrorExampleIsAccepted(t *testing.T) {
	ctx := testContext(t)
	raw, err := os.ReadFile(filepath.Join("..", "examples", "mirror", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ns := env.NewNamespace(t)
	objs := kubetest.DecodeYAML(t, raw)
	for _, o := range objs {
		o.SetNamespace(ns)
		if err := env.Client().Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "Deployment" {
			if _, ok := o.GetAnnotations()["hotcert.dev/rollout-on-change"]; ok {
				t.Errorf("the example Deployment opts in to rollouts: the mirror is there so that it needs none")
			}
		}
	}
	var pod corev1.Pod
	waitFor(t, "a pod of the example Deployment", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := env.Client().List(ctx, &pods, client.InNamespace(ns)); err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = pods.Items[0]
		return true, nil
	})
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("pod has %d init containers, want the mirror", len(pod.Spec.InitContainers))
	}
	side := pod.Spec.InitContainers[0]
	if side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the mirror is not a native sidecar: restartPolicy %v", side.RestartPolicy)
	}
	if side.StartupProbe == nil || side.StartupProbe.HTTPGet == nil || side.StartupProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("the mirror has no startup probe on /healthz: %+v", side.StartupProbe)
	}
	if args := strings.Join(side.Args, " "); !strings.HasPrefix(args, "mirror ") || !strings.Contains(args, "--out=/mirror") {
		t.Errorf("the sidecar does not run hotcert mirror into /mirror: %s", args)
	}
	mounts := func(c corev1.Container) map[string]string {
		m := map[string]string{}
		for _, vm := range c.VolumeMounts {
			m[vm.Name] = vm.MountPath
		}
		return m
	}
	if s, a := mounts(side)["mirror"], mounts(pod.Spec.Containers[0])["mirror"]; s != "/mirror" || a != "/mirror" {
		t.Errorf("the mirror volume is at %q in the sidecar and %q in the program, want /mirror in both", s, a)
	}
}
