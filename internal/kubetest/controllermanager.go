package kubetest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultControllers are the kube-controller-manager controllers that
// [WithControllerManager] runs when given none: the workload controllers,
// garbage collection, namespace deletion and default ServiceAccounts. None of
// them needs a service-account signing key or cluster signing files.
var DefaultControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"job-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
}

// controllerManager is a running kube-controller-manager process.
type controllerManager struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed once the process has exited
	err  error         // the process's exit status, set before done is closed
}

// startControllerManager runs the kube-controller-manager binary at path with
// the given controllers, against the API server of kubeconfig (whose user
// must be an admin), in workDir, writing its output to out, and waits until it
// serves /healthz.
func startControllerManager(path, workDir string, kubeconfig []byte, controllers []string, out *tailBuffer) (*controllerManager, error) {
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, fmt.Errorf("kubetest: creating the controller manager folder: %w", err)
	}
	kubeconfigPath := filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("kubetest: writing the controller manager's kubeconfig: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("kubetest: choosing the controller manager's port: %w", err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfigPath,
		"--authentication-kubeconfig=" + kubeconfigPath,
		"--authorization-kubeconfig=" + kubeconfigPath,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + workDir,
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--profiling=false",
	}
	k := &controllerManager{
		out:  out,
		done: make(chan struct{}),
	}
	k.cmd = exec.Command(path, args...)
	k.cmd.Dir = workDir
	k.cmd.Stdout = k.out
	k.cmd.Stderr = k.out
	k.cmd.SysProcAttr = sysProcAttr()
	// Start and wait for the process on one locked OS thread: the kernel's
	// parent-death signal (see sysProcAttr) follows the thread that forked,
	// and a locked thread lives as long as its goroutine.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with the goroutine.
		if err := k.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		k.err = k.cmd.Wait()
		close(k.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("kubetest: starting %s: %w", path, err)
	}

	if err := k.waitHealthy(fmt.Sprintf("https://127.0.0.1:%d/healthz", port), startTimeout); err != nil {
		err = fmt.Errorf("kubetest: starting kube-controller-manager: %w\n===== kube-controller-manager output (tail) =====\n%s", err, k.out)
		if stopErr := k.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return k, nil
}

// waitHealthy polls url until it answers 200, the process exits or timeout
// passes.
func (k *controllerManager) waitHealthy(url string, timeout time.Duration) error {
	hc := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			// The controller manager serves a self-signed certificate.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test-only health check on loopback
		},
	}
	defer hc.CloseIdleConnections()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-k.done:
			return fmt.Errorf("it exited before becoming healthy: %v", k.err)
		case <-deadline.C:
			return fmt.Errorf("not healthy at %s after %s", url, timeout)
		case <-tick.C:
		}
	}
}

// stop terminates the process, gracefully first, and waits for it.
func (k *controllerManager) stop() error {
	select {
	case <-k.done:
		return nil // exited already (an unexpected exit shows in the output)
	default:
	}
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kubetest: stopping kube-controller-manager: %w", err)
	}
	select {
	case <-k.done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := k.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kubetest: killing kube-controller-manager: %w", err)
	}
	<-k.done
	return nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago. It is
// not internal/testutil.FreePort (a port outside the ephemeral range): this module's
// packages are not tests, and may not import another module's internal
// packages (module_test.go). So the port can still be taken by another
// socket before the controller manager listens on it; its start then fails
// with "address already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
