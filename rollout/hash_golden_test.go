package rollout_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/rollout"
)

// TestComputeGolden pins Compute's output byte for byte. The hash is stamped on
// users' workloads and the entries recorded beside it: a changed byte rolls
// every workload of every cluster on upgrade (and GitOps tools see drift), so a
// change here is a contract change, never a refactoring. The objects are built
// directly (fixed digests and TLS problems), so the values do not depend on
// generated certificates.
func TestComputeGolden(t *testing.T) {
	d := func(v string) rollout.Digest { return sha256.Sum256([]byte(v)) }
	notBefore := time.Date(2026, 6, 1, 12, 0, 3, 0, time.UTC)
	objs := map[string]*rollout.Object{
		"Secret/s":     {Kind: rollout.KindSecret, Name: "s", Keys: map[string]rollout.Digest{"a": d("1"), "b": d("2"), "c": d("")}},
		"Secret/empty": {Kind: rollout.KindSecret, Name: "empty", Keys: map[string]rollout.Digest{}},
		"Secret/ignore-b": {Kind: rollout.KindSecret, Name: "ignore-b", Keys: map[string]rollout.Digest{"a": d("1"), "b": d("2")},
			Exceptions: rollout.Exceptions{Keys: []string{"b", "z"}}},
		"Secret/ignored": {Kind: rollout.KindSecret, Name: "ignored", Keys: map[string]rollout.Digest{"tls.crt": d("crt"), "tls.key": d("key")},
			Problems:   map[string]error{"tls.crt": errors.New("broken certificate")},
			Exceptions: rollout.Exceptions{Object: true}},
		"Secret/malformed": {Kind: rollout.KindSecret, Name: "malformed", Keys: map[string]rollout.Digest{"a": d("1"), "b": d("2")},
			Exceptions: rollout.Exceptions{Err: errors.New("rollout: hotcert.dev/ignore: \"yes please\" is not true or false")}},
		"Secret/tls": {Kind: rollout.KindSecret, Name: "tls", Keys: map[string]rollout.Digest{"tls.crt": d("crt"), "tls.key": d("key"), "ca.crt": d("ca"), "extra.pem": d("x")},
			Problems: map[string]error{
				"tls.crt":   errors.New("Secret ns/tls key tls.crt: does not match tls.key"),
				"tls.key":   errors.New("Secret ns/tls key tls.key: does not match tls.crt"),
				"ca.crt":    &rollout.NotYetValidError{NotBefore: notBefore, Err: errors.New("Secret ns/tls key ca.crt: is not valid before 2026-06-01T12:00:03Z")},
				"extra.pem": errors.New("Secret ns/tls key extra.pem: malformed PEM"),
			}},
		"Secret/early": {Kind: rollout.KindSecret, Name: "early", Keys: map[string]rollout.Digest{"tls.crt": d("crt"), "tls.key": d("key")},
			Problems: map[string]error{
				"tls.crt": &rollout.NotYetValidError{NotBefore: notBefore, Err: errors.New("Secret ns/early key tls.crt: is not valid before 2026-06-01T12:00:03Z")},
				"tls.key": &rollout.NotYetValidError{NotBefore: notBefore, Err: errors.New("Secret ns/early key tls.key: is not valid before 2026-06-01T12:00:03Z")},
			},
			Exceptions: rollout.Exceptions{Keys: []string{"tls.key"}}},
		"ConfigMap/s": {Kind: rollout.KindConfigMap, Name: "s", Keys: map[string]rollout.Digest{"a": d("1")}},
	}
	lookup := func(kind rollout.Kind, name string) (*rollout.Object, error) {
		if name == "fails" {
			return nil, errors.New("lookup failed")
		}
		return objs[string(kind)+"/"+name], nil
	}
	keys := func(ks ...string) []rollout.KeyRef {
		var out []rollout.KeyRef
		for _, k := range ks {
			optional := strings.HasSuffix(k, "?")
			out = append(out, rollout.KeyRef{Key: strings.TrimSuffix(k, "?"), Optional: optional})
		}
		return out
	}
	secret := func(name string, ks ...string) rollout.Ref {
		return rollout.Ref{Kind: rollout.KindSecret, Name: name, Keys: keys(ks...)}
	}
	all := func(r rollout.Ref) rollout.Ref { r.All = true; return r }
	optional := func(r rollout.Ref) rollout.Ref { r.Optional = true; return r }
	key := rollout.WithHashKey([]byte("0123456789abcdef"))

	for _, tc := range []struct {
		name      string
		namespace string
		refs      rollout.Refs
		opts      []rollout.HashOption
		want      string
	}{
		{name: "no refs", want: `
hash dd66811219a3161ebe72c75213a326e08ae247292e2e80c9ec7b1b1dc57849ff
entry #key none
`},
		{name: "no refs, keyed", opts: []rollout.HashOption{key}, want: `
hash 7cb643a571a9d515cb786ddd7597c7cbab91e75b1df58930d57b02873688f27c
entry #key 96c98f15
`},
		{name: "no refs, empty key", opts: []rollout.HashOption{rollout.WithHashKey([]byte{})}, want: `
hash 049422cddf2ed2bedef703b59889971b9ee6385eaf8d955d6c60799667c41b44
entry #key 9a0f35d4
`},
		{name: "absent object", refs: rollout.Refs{secret("gone", "a", "b?")}, want: `
hash e870273b1474c1128300668a6d523324574afcc028168f35c5b030590843ec39
entry #key none
entry Secret/gone -
entry Secret/gone/a -
entry Secret/gone/b -
missing Secret|gone||missing_object|""
`},
		{name: "absent optional object", refs: rollout.Refs{optional(all(secret("gone"))), optional(secret("gone2", "a"))}, want: `
hash 3c892aac210997d77d74e51c8f6ecbdc2e353fe7834a3f5f5f5fd18c6097a583
entry #key none
entry Secret/gone -
entry Secret/gone2 -
entry Secret/gone2/a -
`},
		// A key named twice is hashed twice.
		{name: "keys", refs: rollout.Refs{secret("s", "a", "missing", "opt?", "a", "c")}, want: `
hash 22f13166f1d0b3c2e6494aa16c25fe36277c804f2b6115416628ff5b7fd6e42c
entry #key none
entry Secret/s +
entry Secret/s/a 029af38a746521b2
entry Secret/s/c ae71c2f3c3adeda5
entry Secret/s/missing -
entry Secret/s/opt -
missing Secret|s|missing|missing_key|""
`},
		{name: "keys, other namespace", namespace: "other", refs: rollout.Refs{secret("s", "a", "missing", "opt?", "a", "c")}, want: `
hash 22f13166f1d0b3c2e6494aa16c25fe36277c804f2b6115416628ff5b7fd6e42c
entry #key none
entry Secret/s +
entry Secret/s/a f49892649921693b
entry Secret/s/c 6da6210c8d54cf21
entry Secret/s/missing -
entry Secret/s/opt -
missing Secret|s|missing|missing_key|""
`},
		{name: "keys, keyed", refs: rollout.Refs{secret("s", "a", "missing", "opt?", "a", "c")}, opts: []rollout.HashOption{key}, want: `
hash f6f992728b3fedaf18d44bf28b19b7bca2c505195c1d432b215d532b4dc8d7f8
entry #key 96c98f15
entry Secret/s +
entry Secret/s/a da1ef0878a0799ad
entry Secret/s/c 9d86374a6be38415
entry Secret/s/missing -
entry Secret/s/opt -
missing Secret|s|missing|missing_key|""
`},
		{name: "all", refs: rollout.Refs{all(secret("s"))}, want: `
hash c0a2055c70947d7e45efa93bfbaa20a89322b077a3a1e1b95f7857e76956d8dd
entry #key none
entry Secret/s df2cd1ae68ac9b12
entry Secret/s/a 029af38a746521b2
entry Secret/s/b 8ba5fbf3fedd9295
entry Secret/s/c ae71c2f3c3adeda5
`},
		{name: "all with keys", refs: rollout.Refs{all(secret("s", "z", "b", "y?"))}, want: `
hash 6347270d7fd259c0b749be3a8edc831bb22bba018b2b4f3d3aaf94552397b823
entry #key none
entry Secret/s df2cd1ae68ac9b12
entry Secret/s/a 029af38a746521b2
entry Secret/s/b 8ba5fbf3fedd9295
entry Secret/s/c ae71c2f3c3adeda5
entry Secret/s/y -
entry Secret/s/z -
missing Secret|s|z|missing_key|""
`},
		{name: "all of an empty object", refs: rollout.Refs{all(secret("empty"))}, want: `
hash 0dca8abceefa58a672df46079e7b18af3383b1fc2ef7d09b2471efc9caa5eb5d
entry #key none
entry Secret/empty eb8ce7e52ca61275
`},
		{name: "empty object, no keys", refs: rollout.Refs{secret("empty")}, want: `
hash 516efdbd9eeac2f0d2e60904166b8e57daa63ee3386c0cbdf8f5f341c792fbd0
entry #key none
entry Secret/empty +
`},
		{name: "ignored keys", refs: rollout.Refs{secret("ignore-b", "a", "b", "z")}, want: `
hash 4bcbc8df490d3f863c8f2bbf2cb72f562e23305e11709d089657ed5f188fb98a
entry #key none
entry Secret/ignore-b +
entry Secret/ignore-b/a d452626b38b4d09d
entry Secret/ignore-b/b !b7ccb96bb8fd7c93
entry Secret/ignore-b/z !-
missing Secret|ignore-b|z|missing_key|""
`},
		{name: "ignored keys, all", refs: rollout.Refs{all(secret("ignore-b"))}, want: `
hash 39a6dc443ba316f37a315cbce228de2c41a2a387ce8b569ab41fc3e42117b8d9
entry #key none
entry Secret/ignore-b 47f479cec8e58a4f
entry Secret/ignore-b/a d452626b38b4d09d
entry Secret/ignore-b/b !b7ccb96bb8fd7c93
`},
		{name: "ignored object", refs: rollout.Refs{secret("ignored", "tls.crt", "tls.key", "absent")}, want: `
hash dd66811219a3161ebe72c75213a326e08ae247292e2e80c9ec7b1b1dc57849ff
entry #key none
entry Secret/ignored !+
entry Secret/ignored/absent !-
entry Secret/ignored/tls.crt !d433a55b7a71e42a
entry Secret/ignored/tls.key !85213f6a218c4555
missing Secret|ignored|absent|missing_key|""
`},
		{name: "ignored object, all", refs: rollout.Refs{all(secret("ignored"))}, want: `
hash dd66811219a3161ebe72c75213a326e08ae247292e2e80c9ec7b1b1dc57849ff
entry #key none
entry Secret/ignored !f831d8a6f80a78c3
entry Secret/ignored/tls.crt !d433a55b7a71e42a
entry Secret/ignored/tls.key !85213f6a218c4555
`},
		{name: "malformed exceptions", refs: rollout.Refs{secret("malformed", "a", "b")}, want: `
hash a3fccac9674785b59ec67ce913787b60d091ec4097ec048f9a1940aab6b548db
entry #key none
entry Secret/malformed +
entry Secret/malformed/a 584da58fda92708b
entry Secret/malformed/b 495c600aa1d27159
malformed Secret|malformed||invalid_annotation|"Secret malformed: rollout: hotcert.dev/ignore: \"yes please\" is not true or false"
`},
		{name: "tls problems", refs: rollout.Refs{secret("tls", "tls.crt", "tls.key", "ca.crt")}, want: `
hash 511862e95c355053689e6807e0950e2bbc79c5a60404c884ea19f9a46d935ab1
entry #key none
entry Secret/tls +
entry Secret/tls/ca.crt 6aff5165cc7253fd
entry Secret/tls/tls.crt 44a2deab38ab4b24
entry Secret/tls/tls.key bdc6928978cd12cb
invalid Secret|tls|tls.crt|invalid_tls|"Secret ns/tls key tls.crt: does not match tls.key"
invalid Secret|tls|tls.key|invalid_tls|"Secret ns/tls key tls.key: does not match tls.crt"
notyetvalid Secret|tls|ca.crt|not_yet_valid|"Secret ns/tls key ca.crt: is not valid before 2026-06-01T12:00:03Z"|2026-06-01T12:00:03Z
`},
		{name: "tls problems, all", refs: rollout.Refs{all(secret("tls"))}, want: `
hash 4f34aa2d16181fa6920892d15644cf1ed0537ba3e27b267f3104126ccbf05c48
entry #key none
entry Secret/tls 3cea5f53f8380394
entry Secret/tls/ca.crt 6aff5165cc7253fd
entry Secret/tls/extra.pem 2fd9930ae7c3c5d9
entry Secret/tls/tls.crt 44a2deab38ab4b24
entry Secret/tls/tls.key bdc6928978cd12cb
invalid Secret|tls|extra.pem|invalid_tls|"Secret ns/tls key extra.pem: malformed PEM"
invalid Secret|tls|tls.crt|invalid_tls|"Secret ns/tls key tls.crt: does not match tls.key"
invalid Secret|tls|tls.key|invalid_tls|"Secret ns/tls key tls.key: does not match tls.crt"
notyetvalid Secret|tls|ca.crt|not_yet_valid|"Secret ns/tls key ca.crt: is not valid before 2026-06-01T12:00:03Z"|2026-06-01T12:00:03Z
`},
		{name: "not yet valid, one key ignored", refs: rollout.Refs{secret("early", "tls.crt", "tls.key")}, want: `
hash ed0857726215fa3424f13b82d94b8f3b19e301ba4dda102b92315c8230fb9a8a
entry #key none
entry Secret/early +
entry Secret/early/tls.crt 012034d37fc1747c
entry Secret/early/tls.key !322ff67bc41fb6e2
notyetvalid Secret|early|tls.crt|not_yet_valid|"Secret ns/early key tls.crt: is not valid before 2026-06-01T12:00:03Z"|2026-06-01T12:00:03Z
`},
		{name: "many", refs: rollout.Refs{
			{Kind: rollout.KindConfigMap, Name: "s", Keys: keys("a", "b")},
			{Kind: rollout.KindConfigMap, Name: "gone"},
			secret("early", "tls.crt", "tls.key"),
			secret("gone", "k"),
			all(secret("ignore-b", "c")),
			secret("ignored", "tls.crt"),
			secret("malformed"),
			secret("s", "a", "x"),
			all(secret("tls", "tls.crt")),
		}, opts: []rollout.HashOption{key}, want: `
hash 8f163684cfdfca74a745c0b21721f62956e923922399108e6d997e3456958e83
entry #key 96c98f15
entry ConfigMap/gone -
entry ConfigMap/s +
entry ConfigMap/s/a 451c36e1c62d1443
entry ConfigMap/s/b -
entry Secret/early +
entry Secret/early/tls.crt 10a25330e45ff3f6
entry Secret/early/tls.key !ab1baa78410745b0
entry Secret/gone -
entry Secret/gone/k -
entry Secret/ignore-b 47e386d55d616f5c
entry Secret/ignore-b/a 6dd1bc831ce6ed3c
entry Secret/ignore-b/b !b5e8dd49f4bc7000
entry Secret/ignore-b/c -
entry Secret/ignored !+
entry Secret/ignored/tls.crt !4158b11a9afd66c3
entry Secret/malformed +
entry Secret/s +
entry Secret/s/a da1ef0878a0799ad
entry Secret/s/x -
entry Secret/tls c2ca797e8f9bda03
entry Secret/tls/ca.crt f93437f7b43d27a5
entry Secret/tls/extra.pem e169137b91e1dc74
entry Secret/tls/tls.crt 90a0dbbc1f56a6ce
entry Secret/tls/tls.key a48d0a0ee3bfc0cd
missing ConfigMap|s|b|missing_key|""
missing ConfigMap|gone||missing_object|""
missing Secret|gone||missing_object|""
missing Secret|ignore-b|c|missing_key|""
missing Secret|s|x|missing_key|""
malformed Secret|malformed||invalid_annotation|"Secret malformed: rollout: hotcert.dev/ignore: \"yes please\" is not true or false"
invalid Secret|tls|extra.pem|invalid_tls|"Secret ns/tls key extra.pem: malformed PEM"
invalid Secret|tls|tls.crt|invalid_tls|"Secret ns/tls key tls.crt: does not match tls.key"
invalid Secret|tls|tls.key|invalid_tls|"Secret ns/tls key tls.key: does not match tls.crt"
notyetvalid Secret|early|tls.crt|not_yet_valid|"Secret ns/early key tls.crt: is not valid before 2026-06-01T12:00:03Z"|2026-06-01T12:00:03Z
notyetvalid Secret|tls|ca.crt|not_yet_valid|"Secret ns/tls key ca.crt: is not valid before 2026-06-01T12:00:03Z"|2026-06-01T12:00:03Z
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.namespace
			if ns == "" {
				ns = "ns"
			}
			cfg, err := rollout.Compute(ns, tc.refs, lookup, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			// Each want starts on the line after its opening quote.
			if got, want := renderConfig(cfg), strings.TrimPrefix(tc.want, "\n"); got != want {
				t.Errorf("Compute:\n%s\nwant:\n%s", got, want)
			}
		})
	}

	if cfg, err := rollout.Compute("ns", rollout.Refs{secret("s", "a"), secret("fails")}, lookup); err == nil || cfg != nil {
		t.Errorf("a failed lookup: %v, %v", cfg, err)
	}
}

// renderConfig writes every field of cfg, entries sorted, problems in order.
func renderConfig(cfg *rollout.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hash %s\n", cfg.Hash)
	names := make([]string, 0, len(cfg.Entries))
	for n := range cfg.Entries {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "entry %s %s\n", n, cfg.Entries[n])
	}
	for _, list := range []struct {
		name     string
		problems []rollout.Problem
	}{{"missing", cfg.Missing}, {"malformed", cfg.Malformed}, {"invalid", cfg.Invalid}, {"notyetvalid", cfg.NotYetValid}} {
		if list.problems != nil && len(list.problems) == 0 {
			fmt.Fprintf(&b, "%s: empty, not nil\n", list.name)
		}
		for _, p := range list.problems {
			fmt.Fprintf(&b, "%s %s|%s|%s|%s|%q", list.name, p.Kind, p.Name, p.Key, p.Reason, p.Detail)
			if !p.NotBefore.IsZero() {
				fmt.Fprintf(&b, "|%s", p.NotBefore.Format(time.RFC3339Nano))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
