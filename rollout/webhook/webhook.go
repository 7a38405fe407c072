// Package webhook is a mutating admission webhook that lets hotcert's rollout
// controller coexist with an owner controller that rewrites a workload's pod
// template on its own reconciles (an operator that owns the Deployment of each
// of its custom resources, as kagent's does).
//
// Without it, two level-triggered writers of one pod template ping-pong: the
// rollout controller stamps the template (rollout.AnnotationConfigHash), the
// owner resets the template's annotations to what it wants, the stamp is gone,
// and each write rolls the workload again. With it, a write by anyone but the
// rollout controller that drops or changes the stamp, or the controller's state
// annotations on the workload, gets them back from the stored object: the owner's
// write becomes a no-op, nothing rolls, and the owner's other changes pass
// through untouched. Only the rollout controller (field manager
// rollout.FieldManager, by default) changes the stamp.
//
// Serve Handler over TLS with a hot-reloaded certificate (hotcert.New with a
// file source, httptls.ServerConfig), register it for UPDATE of Deployments,
// StatefulSets and DaemonSets, with failurePolicy Ignore (an unreachable
// webhook degrades to the behaviour without it, it never blocks a write) and
// sideEffects None.
package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout"
)

// Option configures Handler.
type Option interface{ apply(*handler) }

type optionFunc func(*handler)

func (f optionFunc) apply(h *handler) { f(h) }

// WithTrusted replaces how the rollout controller's own writes are recognised
// (by default: field manager rollout.FieldManager). Trusted writes are never
// changed.
func WithTrusted(trusted func(*admissionv1.AdmissionRequest) bool) Option {
	return optionFunc(func(h *handler) { h.trusted = trusted })
}

// Kept are the annotations the webhook keeps: on the pod template, the stamp;
// on the workload, the rollout controller's state.
var (
	KeptTemplateAnnotations = []string{rollout.AnnotationConfigHash}
	KeptAnnotations         = []string{rollout.AnnotationAppliedHash, rollout.AnnotationAppliedKeys, rollout.AnnotationLastRollout,
		rollout.AnnotationRunningValidity, rollout.AnnotationRotated, rollout.AnnotationRolloutPending}
)

// maxBody bounds an AdmissionReview (the API server sends at most a few MB).
const maxBody = 8 << 20

type handler struct {
	trusted func(*admissionv1.AdmissionRequest) bool
}

// Handler returns the webhook's http.Handler (AdmissionReview v1, POST).
func Handler(opts ...Option) http.Handler {
	h := &handler{trusted: func(r *admissionv1.AdmissionRequest) bool {
		var o metav1.UpdateOptions
		if len(r.Options.Raw) > 0 && json.Unmarshal(r.Options.Raw, &o) == nil {
			return o.FieldManager == rollout.FieldManager
		}
		return false
	}}
	for _, o := range opts {
		o.apply(h)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "webhook: POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "webhook: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "webhook: not an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if patch, err := h.patch(review.Request); err != nil {
		// Never block a write: the webhook only ever adds back what was there.
		resp.Warnings = []string{"hotcert webhook: " + err.Error()}
	} else if len(patch) > 0 {
		b, _ := json.Marshal(patch)
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = b, &pt
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// patch returns the JSON patch that puts back the kept annotations.
func (h *handler) patch(req *admissionv1.AdmissionRequest) ([]op, error) {
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 || h.trusted(req) {
		return nil, nil
	}
	var old, cur map[string]any
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return nil, fmt.Errorf("decoding the old object: %w", err)
	}
	if err := json.Unmarshal(req.Object.Raw, &cur); err != nil {
		return nil, fmt.Errorf("decoding the object: %w", err)
	}
	var ops []op
	ops = append(ops, restore(old, cur, []string{"metadata"}, KeptAnnotations)...)
	ops = append(ops, restore(old, cur, []string{"spec", "template", "metadata"}, KeptTemplateAnnotations)...)
	return ops, nil
}

// restore returns the operations that set, in cur's annotations under meta, each
// of keys to its value in old (keys absent from old are left alone).
func restore(old, cur map[string]any, meta []string, keys []string) []op {
	oldAnn, _ := lookup(old, append(meta, "annotations")).(map[string]any)
	want := map[string]any{}
	for _, k := range keys {
		if v, ok := oldAnn[k]; ok {
			want[k] = v
		}
	}
	if len(want) == 0 {
		return nil
	}
	var ops []op
	base := "/" + strings.Join(meta, "/")
	m, isMap := lookup(cur, meta).(map[string]any)
	if !isMap {
		return []op{{Op: "add", Path: base, Value: map[string]any{"annotations": want}}}
	}
	curAnn, hasAnn := m["annotations"].(map[string]any)
	if !hasAnn {
		return []op{{Op: "add", Path: base + "/annotations", Value: want}}
	}
	for _, k := range keys {
		v, ok := want[k]
		if !ok || curAnn[k] == v {
			continue
		}
		ops = append(ops, op{Op: "add", Path: base + "/annotations/" + escape(k), Value: v})
	}
	return ops
}

func lookup(obj map[string]any, path []string) any {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// escape escapes a JSON pointer token (RFC 6901).
func escape(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }
