package census

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// objects is a client.Reader of a few ConfigMaps and Secrets.
type objects map[client.ObjectKey]client.Object

func (o objects) Get(_ context.Context, k client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	got, ok := o[k]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, k.Name)
	}
	switch dst := obj.(type) {
	case *corev1.ConfigMap:
		src, ok := got.(*corev1.ConfigMap)
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, k.Name)
		}
		src.DeepCopyInto(dst)
	case *corev1.Secret:
		src, ok := got.(*corev1.Secret)
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, k.Name)
		}
		src.DeepCopyInto(dst)
	}
	return nil
}

func (objects) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// processVersion is the version a hotcert process reports for a list read
// from files holding exactly data's keys (a mounted ConfigMap's volume).
func processVersion(t *testing.T, ca *hotcerttest.CA, data map[string][]byte, listKey, crlKey string) string {
	t.Helper()
	dir := t.TempDir()
	path := func(key string) string {
		if key == "" {
			return ""
		}
		p := filepath.Join(dir, key)
		if err := os.WriteFile(p, data[key], 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	src, err := revocation.Files(path(listKey), path(crlKey))
	if err != nil {
		t.Fatal(err)
	}
	trust, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: ca.CertPEM}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := revocation.New(context.Background(), src, hotcert.NewStore(trust))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.Current().Version()
}

// TestDenyListVersionIsTheProcesses: the controller computes, from a
// ConfigMap or Secret, the version a hotcert process reading the same keys as
// files reports, and what that list revokes, CRL entries included (checked
// against the rotation's CAs); the keys it reads change the version, as they
// do a process's; a list a process would refuse, or an object that cannot be
// read, is an error.
func TestDenyListVersionIsTheProcesses(t *testing.T) {
	ca := hotcerttest.MustNewCA(hotcerttest.WithCommonName("agents CA"))
	byList, byCRL := ca.MustIssue(), ca.MustIssue()
	now := time.Now()
	data := map[string][]byte{
		"deny.list": fmt.Appendf(nil, "serial %s issuer %s\n", hotcert.FormatSerial(byList.Cert.SerialNumber), hotcert.FingerprintOf(ca.Cert)),
		"ca.crl":    ca.MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour), byCRL.Cert.SerialNumber),
	}
	r := objects{
		{Namespace: "ns", Name: "cm"}:      &corev1.ConfigMap{Data: map[string]string{"deny.list": string(data["deny.list"])}, BinaryData: map[string][]byte{"ca.crl": data["ca.crl"]}},
		{Namespace: "ns", Name: "sec"}:     &corev1.Secret{Data: data},
		{Namespace: "ns", Name: "garbage"}: &corev1.ConfigMap{Data: map[string]string{"deny.list": "revoke everything\n"}},
	}
	cas := []side{{certs: []*x509.Certificate{ca.Cert}}}
	got := readDenyLists(context.Background(), r, []v1alpha1.DenyListObject{
		{ConfigMap: &v1alpha1.DenyListKeys{Namespace: "ns", Name: "cm"}},
		{Secret: &v1alpha1.DenyListKeys{Namespace: "ns", Name: "sec", DenyListKey: "deny.list"}},
		{ConfigMap: &v1alpha1.DenyListKeys{Namespace: "ns", Name: "garbage"}},
		{ConfigMap: &v1alpha1.DenyListKeys{Namespace: "ns", Name: "missing"}},
	}, trustOf(cas), now)

	both, listOnly := got[0], got[1]
	if both.err != "" || both.list.Version() != processVersion(t, ca, data, "deny.list", "ca.crl") {
		t.Fatalf("ConfigMap with both keys: %+v, want version %s", both, processVersion(t, ca, data, "deny.list", "ca.crl"))
	}
	if listOnly.err != "" || listOnly.list.Version() != processVersion(t, ca, data, "deny.list", "") || listOnly.list.Version() == both.list.Version() {
		t.Fatalf("Secret, deny list only: %+v", listOnly)
	}
	issuer := hotcert.FingerprintOf(ca.Cert)
	for _, c := range []struct {
		l      *revocation.List
		serial *big.Int
		want   bool
	}{
		{both.list, byList.Cert.SerialNumber, true}, {both.list, byCRL.Cert.SerialNumber, true},
		{listOnly.list, byList.Cert.SerialNumber, true}, {listOnly.list, byCRL.Cert.SerialNumber, false},
	} {
		if c.l.RevokesSerialOf(issuer, c.serial) != c.want {
			t.Errorf("list %s revokes %s: want %v", c.l.Version(), hotcert.FormatSerial(c.serial), c.want)
		}
	}
	if got[2].err == "" || got[3].err == "" {
		t.Fatalf("a garbage list and a missing object: %+v %+v", got[2], got[3])
	}
}
