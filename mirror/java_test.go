package mirror_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// javaWatcher is testdata/MirrorWatch.java running in a JVM: a Java program that
// watches a directory with a WatchService and loads the PKCS#12 keystore and
// truststore with the JDK's KeyStore, KeyManagerFactory and TrustManagerFactory
// on every event that names them.
type javaWatcher struct {
	mu    sync.Mutex
	lines []string
}

// compileMirrorWatch compiles MirrorWatch.java with javac into a temporary
// directory and returns it. The JDK comes from Debian's openjdk-17-jdk-headless,
// which hack/tools.sh installs.
func compileMirrorWatch(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"javac", "java", "keytool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run hack/tools.sh (it installs Debian's openjdk-17-jdk-headless), or make test", tool)
		}
	}
	classes := t.TempDir()
	start := time.Now()
	if out, err := exec.Command("javac", "-d", classes, filepath.Join("testdata", "MirrorWatch.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	t.Logf("javac MirrorWatch.java: %v", time.Since(start).Round(time.Millisecond))
	return classes
}

// startJava runs MirrorWatch on dir until the test ends and waits for READY.
func startJava(t *testing.T, classes, dir, passwordFile string) *javaWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classes, "MirrorWatch", dir, passwordFile)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &javaWatcher{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		<-done
	})
	// A JVM's start, under a loaded make test, can take longer than
	// testutil.WaitFor's 10 s: wait a minute for the first load.
	for deadline := time.Now().Add(time.Minute); !w.has("READY"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for MirrorWatch to be READY", time.Since(start).Round(time.Millisecond))
		}
	}
	t.Logf("JVM start to READY (first keystore and truststore loaded): %v", time.Since(start).Round(time.Millisecond))
	return w
}

func (w *javaWatcher) has(line string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.lines, line)
}

func (w *javaWatcher) matching(prefix string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, l := range w.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func keystoreLine(l *hotcerttest.Leaf) string {
	return "KEYSTORE " + sha256Hex(l.Cert.Raw) + " EC 1"
}

func truststoreLine(cas ...*hotcerttest.CA) string {
	fps := make([]string, len(cas))
	for i, ca := range cas {
		fps[i] = sha256Hex(ca.Cert.Raw)
	}
	slices.Sort(fps)
	return "TRUSTSTORE " + strings.Join(fps, ",")
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestJavaWatcher runs a Java program that watches files (testdata/MirrorWatch.java,
// compiled once) against the mirror, and against a kubelet volume without it.
func TestJavaWatcher(t *testing.T) {
	classes := compileMirrorWatch(t)
	t.Run("follows every kubelet swap through the mirror", func(t *testing.T) { testJavaFollowsEveryKubeletSwap(t, classes) })
	t.Run("misses every kubelet swap without the mirror", func(t *testing.T) { testJavaMissesKubeletSwapsWithoutTheMirror(t, classes) })
}

// testJavaFollowsEveryKubeletSwap: 200 kubelet-style swaps of a Secret
// volume in a row — each a renewed leaf, and a CA bundle that gains or loses a
// second CA — are each picked up by a Java program watching the mirror
// directory: its KeyManagerFactory holds every new leaf and key, its
// TrustManagerFactory every new set of anchors, and no file ever failed to load.
func testJavaFollowsEveryKubeletSwap(t *testing.T, classes string) {
	f := newFixture(t)
	java := startJava(t, classes, f.out, filepath.Join(f.pwVol.Dir(), "password"))
	if !java.has(keystoreLine(f.leaf)) || !java.has(truststoreLine(f.ca)) {
		t.Fatalf("Java did not load the first keystore and truststore: %v", java.matching(""))
	}
	const swaps = 200
	ca2 := hotcerttest.MustNewCA()
	lat := make([]time.Duration, 0, swaps)
	var mirrored []time.Duration // the kubelet's swap to the mirror's renames
	for i := range swaps {
		leaf := f.ca.MustIssue()
		cas := []*hotcerttest.CA{f.ca}
		if i%2 == 0 {
			cas = append(cas, ca2)
		}
		gen := f.m.Status().Generation
		start := time.Now()
		f.secret.MustWrite(f.payload(leaf, cas...))
		testutil.WaitFor(t, fmt.Sprintf("swap %d in the mirror", i+1), func() bool { return f.m.Status().Generation > gen })
		mirrored = append(mirrored, time.Since(start))
		testutil.WaitFor(t, fmt.Sprintf("Java to hold swap %d", i+1), func() bool {
			return java.has(keystoreLine(leaf)) && java.has(truststoreLine(cas...))
		})
		lat = append(lat, time.Since(start))
	}
	if errs := java.matching("ERROR"); len(errs) > 0 {
		t.Errorf("Java failed to load %d times: %v", len(errs), errs)
	}
	if got := len(java.matching("KEYSTORE")); got != swaps+1 {
		t.Errorf("Java held %d keystores, want %d (the first and one per swap)", got, swaps+1)
	}
	if got := len(java.matching("TRUSTSTORE")); got != swaps+1 {
		t.Errorf("Java held %d sets of trust anchors, want %d (the first and one per swap)", got, swaps+1)
	}
	t.Logf("%d swaps, 0 missed; kubelet swap to the mirror written: %s; to Java holding it: %s", swaps, percentiles(mirrored), percentiles(lat))
}

// testJavaMissesKubeletSwapsWithoutTheMirror is the failure the mirror
// exists for, shown with the same Java program: pointed at a kubelet volume
// that holds the keystore itself (as a Secret with PKCS#12 keystores does), it
// never reloads, because no event of a "..data" swap names keystore.p12. The
// last event (truststore.p12 renamed in place) proves the swaps' events were
// all handled by then.
func testJavaMissesKubeletSwapsWithoutTheMirror(t *testing.T, classes string) {
	ca := hotcerttest.MustNewCA()
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	volume := hotcerttest.MustNewAtomicWriter(filepath.Join(dir, "secret"))
	keystore := func(l *hotcerttest.Leaf) []byte {
		b, err := pkcs12.Modern.Encode(l.Key, l.Cert, nil, "pw")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := ca.MustIssue()
	volume.MustWrite(map[string][]byte{"keystore.p12": keystore(first), "truststore.p12": truststoreBytes(t, ca)})
	java := startJava(t, classes, volume.Dir(), pw)
	var last *hotcerttest.Leaf
	for range 3 {
		last = ca.MustIssue()
		volume.MustWrite(map[string][]byte{"keystore.p12": keystore(last), "truststore.p12": truststoreBytes(t, ca)})
	}
	ca2 := hotcerttest.MustNewCA()
	tmp := filepath.Join(volume.Dir(), ".truststore.p12.new")
	if err := os.WriteFile(tmp, truststoreBytes(t, ca, ca2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(volume.Dir(), "truststore.p12")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "Java to see the truststore renamed in place", func() bool { return java.has(truststoreLine(ca, ca2)) })
	if got := java.matching("KEYSTORE"); !slices.Equal(got, []string{keystoreLine(first)}) {
		t.Fatalf("Java reloaded the keystore of a kubelet volume: %v", got)
	}
	t.Logf("3 kubelet swaps of a volume holding keystore.p12: Java reloaded 0 of them (it still holds %s)", keystoreLine(first))
}

// truststoreBytes encodes cas as a Java truststore with the password "pw".
func truststoreBytes(t *testing.T, cas ...*hotcerttest.CA) []byte {
	t.Helper()
	certs := make([]*x509.Certificate, len(cas))
	for i, ca := range cas {
		certs[i] = ca.Cert
	}
	b, err := pkcs12.Modern.EncodeTrustStore(certs, "pw")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// percentiles says p50, p99 and max of d.
func percentiles(d []time.Duration) string {
	slices.Sort(d)
	r := func(x time.Duration) time.Duration { return x.Round(100 * time.Microsecond) }
	return fmt.Sprintf("p50 %v, p99 %v, max %v", r(d[len(d)/2]), r(d[len(d)*99/100]), r(d[len(d)-1]))
}
