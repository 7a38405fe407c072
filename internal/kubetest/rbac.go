package kubetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// rbacTimeout bounds the provisioning of a restricted user.
const rbacTimeout = 30 * time.Second

// NewRestrictedConfig provisions a user named user (in no group but
// system:authenticated) that holds exactly the given rules, and returns a REST
// config acting as that user. With a namespace, the rules are granted by a
// Role and RoleBinding in it (the namespace is created if missing); with "",
// by a ClusterRole and ClusterRoleBinding. Both are named "kubetest:<user>"
// and deleted when the test ends. It returns once the API server enforces the
// rules, and fails the test on error.
func (e *Env) NewRestrictedConfig(t testing.TB, user string, rules []rbacv1.PolicyRule, namespace string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rbacTimeout)
	defer cancel()
	cfg, cleanup, err := e.newRestrictedConfig(ctx, user, rules, namespace)
	if cleanup != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), rbacTimeout)
			defer cancel()
			if err := cleanup(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newRestrictedConfig does the work of NewRestrictedConfig; cleanup, when not
// nil, deletes what was created, even if err is not nil.
func (e *Env) newRestrictedConfig(ctx context.Context, user string, rules []rbacv1.PolicyRule, namespace string) (_ *rest.Config, cleanup func(context.Context) error, _ error) {
	if user == "" {
		return nil, nil, fmt.Errorf("kubetest: restricted user: the name is empty")
	}
	rbac := e.clientset.RbacV1()
	name := "kubetest:" + user
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var deletes []func(context.Context) error
	cleanup = func(ctx context.Context) error {
		for i := len(deletes) - 1; i >= 0; i-- {
			if err := deletes[i](ctx); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("kubetest: deleting the RBAC objects of %q: %w", user, err)
			}
		}
		return nil
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: namespace}

	if namespace == "" {
		if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{}); err != nil {
			return nil, cleanup, fmt.Errorf("kubetest: creating ClusterRole %s: %w", name, err)
		}
		deletes = append(deletes, func(ctx context.Context) error {
			return rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		})
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: meta,
			Subjects:   subjects,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return nil, cleanup, fmt.Errorf("kubetest: creating ClusterRoleBinding %s: %w", name, err)
		}
		deletes = append(deletes, func(ctx context.Context) error {
			return rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		})
	} else {
		_, err := e.clientset.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, cleanup, fmt.Errorf("kubetest: creating namespace %s: %w", namespace, err)
		}
		if _, err := rbac.Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{}); err != nil {
			return nil, cleanup, fmt.Errorf("kubetest: creating Role %s/%s: %w", namespace, name, err)
		}
		deletes = append(deletes, func(ctx context.Context) error {
			return rbac.Roles(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		})
		binding := &rbacv1.RoleBinding{
			ObjectMeta: meta,
			Subjects:   subjects,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		}
		if _, err := rbac.RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return nil, cleanup, fmt.Errorf("kubetest: creating RoleBinding %s/%s: %w", namespace, name, err)
		}
		deletes = append(deletes, func(ctx context.Context) error {
			return rbac.RoleBindings(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		})
	}

	if err := e.waitAllowed(ctx, user, rules, namespace); err != nil {
		return nil, cleanup, err
	}

	cfg, err := e.addUser(envtest.User{Name: user})
	if err != nil {
		return nil, cleanup, err
	}
	return cfg, cleanup, nil
}

// addUser provisions a client certificate for user and returns a REST config
// using it.
func (e *Env) addUser(user envtest.User) (*rest.Config, error) {
	// envtest's user provisioning is not safe for concurrent use, nor during
	// a restart.
	e.mu.Lock()
	defer e.mu.Unlock()
	authUser, err := e.te.ControlPlane.AddUser(user, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("kubetest: provisioning user %q: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(authUser.Config())
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg, nil
}

// waitAllowed waits until the API server's authorizer, whose caches follow
// RBAC objects with a delay, allows user the first of rules.
func (e *Env) waitAllowed(ctx context.Context, user string, rules []rbacv1.PolicyRule, namespace string) error {
	spec, ok := accessReviewFor(user, rules, namespace)
	if !ok {
		return nil // nothing granted, or nothing simple to check
	}
	var last string
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		sar, err := e.clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx,
			&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("allowed=%t reason=%q", sar.Status.Allowed, sar.Status.Reason)
		return sar.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("kubetest: waiting for the RBAC rules of %q to take effect: %w (last review: %s)", user, err, last)
	}
	return nil
}

// accessReviewFor returns a SubjectAccessReview of the first rule that names
// a verb and a resource or URL.
func accessReviewFor(user string, rules []rbacv1.PolicyRule, namespace string) (authorizationv1.SubjectAccessReviewSpec, bool) {
	spec := authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"}}
	first := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[0]
	}
	for _, r := range rules {
		if len(r.Verbs) == 0 {
			continue
		}
		if len(r.NonResourceURLs) > 0 {
			spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{
				Path: strings.TrimSuffix(r.NonResourceURLs[0], "*"),
				Verb: r.Verbs[0],
			}
			return spec, true
		}
		if len(r.Resources) == 0 || len(r.APIGroups) == 0 {
			continue
		}
		resource, subresource, _ := strings.Cut(r.Resources[0], "/")
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace:   namespace,
			Verb:        r.Verbs[0],
			Group:       r.APIGroups[0],
			Resource:    resource,
			Subresource: subresource,
			Name:        first(r.ResourceNames),
		}
		return spec, true
	}
	return spec, false
}
