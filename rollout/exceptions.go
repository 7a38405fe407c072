package rollout

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Exceptions are what a Secret's or ConfigMap's own annotations exclude from
// rolling ([AnnotationIgnore], [AnnotationIgnoreKeys]). Ignored content is left
// out of the hash; the recorded state still names it, so that an Event can say
// why a change did not roll.
type Exceptions struct {
	// Object is true when every key of the object is ignored.
	Object bool
	// Keys are the ignored keys, sorted.
	Keys []string
	// Err says why an annotation's value is malformed; such a value excepts
	// nothing (a change then rolls, as without the annotation).
	Err error
}

// Ignores reports whether key is ignored.
func (e Exceptions) Ignores(key string) bool {
	if e.Object {
		return true
	}
	_, ok := slices.BinarySearch(e.Keys, key)
	return ok
}

// parseExceptions reads the exception annotations of an object.
func parseExceptions(annotations map[string]string) Exceptions {
	var e Exceptions
	var errs []string
	if v, ok := annotations[AnnotationIgnore]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %q is not true or false", AnnotationIgnore, v))
		}
		e.Object = b
	}
	if v, ok := annotations[AnnotationIgnoreKeys]; ok {
		var keys []string
		bad := false
		for k := range strings.SplitSeq(v, ",") {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			if msgs := validation.IsConfigMapKey(k); len(msgs) > 0 {
				errs = append(errs, fmt.Sprintf("%s: %q is not a key name: %s", AnnotationIgnoreKeys, k, strings.Join(msgs, "; ")))
				bad = true
				continue
			}
			keys = append(keys, k)
		}
		if !bad {
			slices.Sort(keys)
			e.Keys = slices.Compact(keys)
		}
	}
	if len(errs) > 0 {
		e.Err = fmt.Errorf("rollout: %s", strings.Join(errs, "; "))
	}
	return e
}
