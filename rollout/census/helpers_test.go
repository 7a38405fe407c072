package census_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// configMapRotation creates, in namespace ns, ConfigMap "ca" holding CA-2025
// and a TrustRotation from CA-2025 to CA-2026 over its key ca.crt, deleted
// when the test ends; it returns the rotation's name.
func configMapRotation(t *testing.T, ns string) string {
	t.Helper()
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(ca2025.CertPEM)}})
	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
	})
	return name
}

// capturedLog is a logger that keeps every line it writes, for a test to
// read.
func capturedLog() (logr.Logger, func() string) {
	var mu sync.Mutex
	var logs strings.Builder
	log := funcr.NewJSON(func(line string) {
		mu.Lock()
		defer mu.Unlock()
		logs.WriteString(line + "\n")
	}, funcr.Options{})
	return log, func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
}

// apiErrorResponse is the answer an API server gives req when it refuses it
// with err: err's Status, as JSON, with its code.
func apiErrorResponse(t *testing.T, req *http.Request, err *apierrors.StatusError) *http.Response {
	st := err.Status()
	st.APIVersion, st.Kind = "v1", "Status"
	body, jerr := json.Marshal(st)
	if jerr != nil {
		t.Error(jerr)
	}
	return &http.Response{StatusCode: int(st.Code), Status: http.StatusText(int(st.Code)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(string(body))), Request: req}
}
