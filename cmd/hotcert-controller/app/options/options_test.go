package options

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hotcert/hotcert/rollout/controller"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := New()
	fs := pflag.NewFlagSet("hotcert-controller", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestValidate: each nonsensical flag is refused with its name.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-rollouts-per-minute=0"}, "would never roll anything"},
		{[]string{"--secret-cache=everything"}, "--secret-cache \"everything\": want referenced or metadata"},
		{[]string{"--secret-cache=full"}, "want referenced or metadata"},
		{[]string{"--rollout-wait-timeout=-1s"}, "--rollout-wait-timeout -1s is negative"},
		{[]string{"--max-concurrent-reconciles=-1"}, "--max-concurrent-reconciles -1 is negative"},
		{[]string{"--leader-election-id="}, "--leader-election-id is empty"},
		{[]string{"--namespace-selector=team in (a"}, "--namespace-selector \"team in (a\":"},
		{[]string{"--workload-selector=a=b=c"}, "--workload-selector \"a=b=c\":"},
		{[]string{"--webhook-bind-address=:9443"}, "--webhook-cert-file and --webhook-key-file"},
		{[]string{"--census", "--census-interval=0s"}, "--census-interval 0s: want a positive duration"},
		{[]string{"--census-drive"}, "--census-drive needs --census"},
	} {
		if err := parse(t, tc.args...).Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	if err := New().Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

// TestDefaultsAreTheLibrarys: the flags' defaults are the controller's.
func TestDefaultsAreTheLibrarys(t *testing.T) {
	o := New()
	want := controller.Options{}.Default()
	if o.MinInterval != want.MinInterval || o.MaxRollouts != want.MaxRollouts || o.RolloutWaitTimeout != want.RolloutWaitTimeout ||
		o.MaxConcurrentReconciles != want.MaxConcurrentReconciles || o.MetricsPrefix != want.MetricsPrefix || o.SecretCache != want.SecretCache {
		t.Errorf("flag defaults %+v differ from the controller's %+v", o.Options, want)
	}
}

// kubeconfig writes a kubeconfig whose context names namespace ns ("" for
// none); nothing is contacted.
func kubeconfig(t *testing.T, ns string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: ns}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestComplete: --min-interval=0 means no interval (not the library's
// default); the hash key is read; the API server settings are applied.
func TestComplete(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := parse(t, "--min-interval=0", "--kubeconfig", kubeconfig(t, "team-a"), "--hash-key-file", key, "--kube-api-qps=7", "--namespace=team-a")
	cfg, err := o.Complete(logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Controller.Default().MinInterval; got != 0 {
		t.Errorf("--min-interval=0 became %s", got)
	}
	if string(cfg.Controller.HashKey) != "0123456789abcdef0123" {
		t.Error("the hash key was not read (trimmed)")
	}
	if cfg.REST.QPS != 7 || cfg.REST.Host != "https://127.0.0.1:1" || len(cfg.Controller.Namespaces) != 1 {
		t.Errorf("REST config %+v, namespaces %v", cfg.REST, cfg.Controller.Namespaces)
	}
	if cfg.Census != nil {
		t.Error("the census is on without --census")
	}
	if cfg.Manager.PprofBindAddress != "0" {
		t.Errorf("the profiles are served on %q without --pprof-bind-address", cfg.Manager.PprofBindAddress)
	}
	o = parse(t, "--kubeconfig", kubeconfig(t, "team-a"), "--census", "--census-interval=30s", "--metrics-prefix=acme",
		"--namespace=a", "--namespace=b", "--namespace-selector=team=payments")
	if cfg, err = o.Complete(logr.Discard()); err != nil {
		t.Fatal(err)
	}
	// The census counts the pods of the namespaces the controller watches.
	if c := cfg.Census; c == nil || c.Interval != 30*time.Second || c.MetricsPrefix != "acme" ||
		!slices.Equal(c.Namespaces, []string{"a", "b"}) || c.NamespaceSelector == nil || c.NamespaceSelector.String() != "team=payments" || c.Drive {
		t.Errorf("census options %+v", c)
	}
	o = parse(t, "--kubeconfig", kubeconfig(t, "team-a"), "--census", "--census-drive")
	if cfg, err = o.Complete(logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if c := cfg.Census; c == nil || !c.Drive {
		t.Errorf("census options %+v with --census-drive", c)
	}
	o = parse(t, "--kubeconfig", kubeconfig(t, "team-a"), "--pprof-bind-address=127.0.0.1:6060")
	if cfg, err = o.Complete(logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if cfg.Manager.PprofBindAddress != "127.0.0.1:6060" {
		t.Errorf("--pprof-bind-address=127.0.0.1:6060 gave the manager %q", cfg.Manager.PprofBindAddress)
	}
}

// TestLeaderElectionNamespace: in a cluster, controller-runtime finds the
// pod's namespace; outside, the kubeconfig context's namespace is used, or
// leader election is off, with a line that names the flag; the flag always
// wins.
func TestLeaderElectionNamespace(t *testing.T) {
	podNamespace := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(podNamespace, []byte("hotcert-system"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		inCluster bool
		context   string
		flag      string
		wantOn    bool
		wantNS    string
		wantLog   string
	}{
		{"laptop, context namespace", false, "team-a", "", true, "team-a", "the kubeconfig context's namespace"},
		{"laptop, no context namespace", false, "", "", false, "", "leader election is off, so run one replica (--leader-election-namespace turns it on)"},
		{"laptop, flag", false, "", "ops", true, "ops", ""},
		{"in a pod", true, "", "", true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := parse(t, "--kubeconfig", kubeconfig(t, tc.context), "--leader-election-namespace="+tc.flag)
			o.inClusterNamespaceFile = filepath.Join(t.TempDir(), "absent")
			if tc.inCluster {
				o.inClusterNamespaceFile = podNamespace
				t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
			}
			var logs strings.Builder
			cfg, err := o.Complete(logr.FromSlogHandler(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Manager.LeaderElection != tc.wantOn || cfg.Manager.LeaderElectionNamespace != tc.wantNS {
				t.Errorf("leader election %v in %q, want %v in %q", cfg.Manager.LeaderElection, cfg.Manager.LeaderElectionNamespace, tc.wantOn, tc.wantNS)
			}
			if !strings.Contains(logs.String(), tc.wantLog) || (tc.wantLog == "" && logs.Len() > 0) {
				t.Errorf("log %q, want %q", logs.String(), tc.wantLog)
			}
		})
	}
}

// TestNoCluster: without any kubeconfig, the error says what to set.
func TestNoCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	o := New()
	o.inClusterNamespaceFile = filepath.Join(t.TempDir(), "absent")
	_, err := o.Complete(logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "set --kubeconfig") {
		t.Fatalf("Complete without a cluster: %v", err)
	}
}
