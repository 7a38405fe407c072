package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// startTimeout bounds the start of each control plane process. It is
	// generous because `go test ./...` runs several packages' tests at once
	// on a 2-core machine, under -race.
	startTimeout = 90 * time.Second
	// stopTimeout bounds the graceful stop of each process before it is killed.
	stopTimeout = 20 * time.Second
	// readyTimeout bounds the wait for the API server to report ready.
	readyTimeout = 60 * time.Second
	// logTail is how much of each process's output is kept for failures.
	logTail = 64 << 10
)

// Option configures an [Env].
type Option func(*options)

type options struct {
	controllerManager bool
	controllers       []string
	crds              []*apiextensionsv1.CustomResourceDefinition
	crdPaths          []string
	scheme            *runtime.Scheme
	apiServerFlags    map[string][]string
}

// WithControllerManager also runs the real kube-controller-manager against the
// API server, with the given controllers (names as in its --controllers flag,
// e.g. "deployment-controller"); with none, [DefaultControllers].
func WithControllerManager(controllers ...string) Option {
	return func(o *options) {
		o.controllerManager = true
		o.controllers = controllers
	}
}

// WithCRDs installs the given CustomResourceDefinitions once the API server
// is up, and waits until they are served.
func WithCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) Option {
	return func(o *options) { o.crds = append(o.crds, crds...) }
}

// WithCRDPaths installs the CustomResourceDefinitions in the given YAML or
// JSON files, or folders of them; a missing path is an error.
func WithCRDPaths(paths ...string) Option {
	return func(o *options) { o.crdPaths = append(o.crdPaths, paths...) }
}

// WithScheme sets the scheme of the Env's controller-runtime client (and the
// one used to install CRDs). The default has client-go's built-in types and
// apiextensions/v1.
func WithScheme(s *runtime.Scheme) Option {
	return func(o *options) { o.scheme = s }
}

// WithAPIServerFlag sets a kube-apiserver flag (name without the leading
// dashes), replacing envtest's default for it, e.g.
// WithAPIServerFlag("feature-gates", "SomeGate=true").
func WithAPIServerFlag(name string, values ...string) Option {
	return func(o *options) {
		if o.apiServerFlags == nil {
			o.apiServerFlags = map[string][]string{}
		}
		o.apiServerFlags[name] = values
	}
}

// Env is a running control plane: etcd and kube-apiserver, and the
// kube-controller-manager with [WithControllerManager]. Its methods are safe
// for concurrent use.
type Env struct {
	te         *envtest.Environment
	cfg        *rest.Config
	clientset  kubernetes.Interface
	client     client.Client
	scheme     *runtime.Scheme
	kubeconfig []byte

	workDir      string
	apiServerLog *tailBuffer
	etcdLog      *tailBuffer
	kcm          *controllerManager                 // nil without WithControllerManager
	startKCM     func() (*controllerManager, error) // starts kcm anew
	kcmLog       *tailBuffer

	mu      sync.Mutex // serialises Restart, Stop and adding users
	stopped bool
}

// Start starts an Env for the test and stops it when the test ends (see
// [testing.TB.Cleanup]); if the test failed, the control plane's output is
// logged then. It fails the test, never skips it, when the Env cannot start,
// notably when the Kubernetes binaries are missing (run `make k8s-bins`).
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	e, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(e.output())
		}
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// Main starts an Env shared by all the tests of a package, stores it in *env,
// runs the tests, stops the Env and exits; call it from TestMain. When the Env
// cannot start or a test failed, it prints the control plane's output.
func Main(m *testing.M, env **Env, opts ...Option) {
	os.Exit(runMain(m, env, os.Stderr, opts...))
}

func runMain(m *testing.M, env **Env, stderr io.Writer, opts ...Option) int {
	e, err := New(opts...)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	*env = e
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(stderr, e.output())
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintln(stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// New starts an Env; the caller must call [Env.Stop]. Tests should rather use
// [Start] or [Main].
func New(opts ...Option) (_ *Env, retErr error) {
	// Keep controller-runtime quiet (it prints a stack trace when its global
	// logger is still unset 30s into the test binary); it keeps the first
	// logger set, so a test that wants its logs sets one before this.
	ctrllog.SetLogger(logr.Discard())

	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bins := []string{apiServerBin, etcdBin}
	if o.controllerManager {
		bins = append(bins, controllerManagerBin)
	}
	assets, err := findAssets(bins)
	if err != nil {
		return nil, err
	}
	scheme := o.scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("kubetest: building the scheme: %w", err)
		}
		if err := apiextensionsv1.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("kubetest: building the scheme: %w", err)
		}
	}

	workDir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: creating a work folder: %w", err)
	}
	e := &Env{
		scheme:       scheme,
		workDir:      workDir,
		apiServerLog: newTailBuffer(logTail),
		etcdLog:      newTailBuffer(logTail),
	}
	defer func() {
		if retErr != nil {
			if out := e.output(); out != "" {
				retErr = fmt.Errorf("%w\n%s", retErr, out)
			}
			if err := e.Stop(); err != nil {
				retErr = errors.Join(retErr, err)
			}
		}
	}()

	// The API server's certificates live in a folder of ours rather than one
	// envtest allocates, so that they survive a restart (see Restart): the
	// clients' CA and the port stay valid.
	certDir := filepath.Join(workDir, "apiserver")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("kubetest: creating the API server folder: %w", err)
	}
	apiServer := &envtest.APIServer{
		Path:    filepath.Join(assets, apiServerBin),
		CertDir: certDir,
		Out:     e.apiServerLog,
		Err:     e.apiServerLog,
	}
	args := apiServer.Configure()
	// On SIGTERM, stop within ~2s even with watches open (by default the
	// API server waits up to its 60s request timeout for them), so that
	// Restart and Stop are quick.
	args.Set("shutdown-send-retry-after", "true")
	for name, values := range o.apiServerFlags {
		args.Set(name, values...)
	}
	etcd := &envtest.Etcd{
		Path: filepath.Join(assets, etcdBin),
		Out:  e.etcdLog,
		Err:  e.etcdLog,
	}
	// A lone member elects itself after one election timeout (1s by
	// default); with no peers, a short one is safe and starts etcd sooner.
	etcd.Configure().
		Set("heartbeat-interval", "10").
		Set("election-timeout", "100")
	e.te = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: apiServer,
			Etcd:      etcd,
		},
		BinaryAssetsDirectory:    assets,
		Scheme:                   scheme,
		CRDs:                     o.crds,
		CRDDirectoryPaths:        o.crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}
	cfg, err := e.te.Start()
	if err != nil {
		return nil, fmt.Errorf("kubetest: starting the control plane: %w", err)
	}
	cfg.WarningHandler = rest.NoWarnings{}
	e.cfg = cfg
	e.kubeconfig = e.te.KubeConfig

	if e.clientset, err = kubernetes.NewForConfig(e.Config()); err != nil {
		return nil, fmt.Errorf("kubetest: creating a clientset: %w", err)
	}
	if e.client, err = client.New(e.Config(), client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("kubetest: creating a controller-runtime client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := e.waitReady(ctx); err != nil {
		return nil, err
	}

	if o.controllerManager {
		controllers := o.controllers
		if len(controllers) == 0 {
			controllers = DefaultControllers
		}
		e.kcmLog = newTailBuffer(logTail)
		kcmPath, kcmDir := filepath.Join(assets, controllerManagerBin), filepath.Join(workDir, "kube-controller-manager")
		e.startKCM = func() (*controllerManager, error) {
			// Its port was free a moment before; retry if another process
			// took it meanwhile.
			for attempt := 1; ; attempt++ {
				k, err := startControllerManager(kcmPath, kcmDir, e.kubeconfig, controllers, e.kcmLog)
				if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
					return k, err
				}
			}
		}
		if e.kcm, err = e.startKCM(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Stop stops the control plane and removes its files. It is idempotent.
func (e *Env) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	var errs []error
	if e.kcm != nil {
		if err := e.kcm.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.te != nil {
		if err := e.te.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("kubetest: stopping the control plane: %w", err))
		}
	}
	if err := os.RemoveAll(e.workDir); err != nil {
		errs = append(errs, fmt.Errorf("kubetest: removing the work folder: %w", err))
	}
	return errors.Join(errs...)
}

// Config returns a new copy of the admin user's REST config (group
// system:masters), which callers may modify.
func (e *Env) Config() *rest.Config {
	return rest.CopyConfig(e.cfg)
}

// KubeConfig returns a kubeconfig file's contents for the admin user, e.g. for
// running other binaries against the Env.
func (e *Env) KubeConfig() []byte {
	return append([]byte(nil), e.kubeconfig...)
}

// Clientset returns a client-go clientset acting as the admin user.
func (e *Env) Clientset() kubernetes.Interface {
	return e.clientset
}

// Client returns a controller-runtime client acting as the admin user,
// knowing the types of the Env's scheme.
func (e *Env) Client() client.Client {
	return e.client
}

// Scheme returns the scheme of [Env.Client].
func (e *Env) Scheme() *runtime.Scheme {
	return e.scheme
}

// NewNamespace creates a namespace with a generated name for the test and
// returns its name; it deletes it when the test ends. (Without the
// controller manager's namespace controller, deleted namespaces stay
// Terminating, which does no harm.)
func (e *Env) NewNamespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := e.clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubetest-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.clientset.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("kubetest: deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// Restart stops kube-apiserver and starts it again on the same etcd, port and
// certificates, and waits until it is ready; the data, users and configs stay
// valid, and clients reconnect by themselves. It fails the test on error.
//
// The controller manager, if any, is stopped before and started again after:
// it would reconnect by itself too, but client-go's backoff, growing with
// each restart, could delay it by up to a minute.
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	if err := e.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
}

// RestartAPIServer is [Env.Restart] returning an error rather than failing a
// test.
func (e *Env) RestartAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("kubetest: restarting the API server: the Env is stopped")
	}
	if e.kcm != nil {
		if err := e.kcm.stop(); err != nil {
			return err
		}
		e.kcm = nil
	}
	apiServer := e.te.ControlPlane.APIServer
	// A failed stop has killed the process: start it again all the same,
	// lest the Env be left without an API server.
	var stopErr error
	if err := apiServer.Stop(); err != nil {
		stopErr = fmt.Errorf("kubetest: stopping the API server: %w", err)
	}
	fmt.Fprintf(e.apiServerLog, "\n===== kubetest: API server restarting at %s =====\n", time.Now().Format(time.RFC3339Nano))
	if err := apiServer.Start(); err != nil {
		return errors.Join(stopErr, fmt.Errorf("kubetest: starting the API server again: %w\n%s", err, e.apiServerLog))
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := e.waitReady(ctx); err != nil {
		return errors.Join(stopErr, err)
	}
	if e.startKCM != nil {
		fmt.Fprintf(e.kcmLog, "\n===== kubetest: restarting at %s =====\n", time.Now().Format(time.RFC3339Nano))
		var err error
		if e.kcm, err = e.startKCM(); err != nil {
			return errors.Join(stopErr, err)
		}
	}
	return stopErr
}

// waitReady polls the API server's /readyz until it answers ok: then its
// informers (for RBAC notably) have synced and its bootstrap is done.
func (e *Env) waitReady(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		body, err := e.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(body)))
			return false, nil
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("kubetest: waiting for the API server to be ready: %w (last: %w)", err, last)
	}
	if err != nil {
		return fmt.Errorf("kubetest: waiting for the API server to be ready: %w", err)
	}
	return nil
}

// output returns the kept output of the control plane's processes.
func (e *Env) output() string {
	var b strings.Builder
	section := func(name string, buf fmt.Stringer) {
		if s := buf.String(); s != "" {
			fmt.Fprintf(&b, "===== %s output (tail) =====\n%s\n", name, s)
		}
	}
	if e.kcmLog != nil {
		section(controllerManagerBin, e.kcmLog)
	}
	section(apiServerBin, e.apiServerLog)
	section(etcdBin, e.etcdLog)
	return b.String()
}
