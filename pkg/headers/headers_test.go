package headers_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/headers"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value, want string
	}{
		{"Bearer abc", ""},
		{"", ""},
		{"a\tb", ""},
		{"tok\n", headers.ReasonControl},
		{"to\rk", headers.ReasonControl},
		{"to\x00k", headers.ReasonControl},
		{"to\x0bk", headers.ReasonControl},
		{"to\x7fk", headers.ReasonControl},
		{" tok", headers.ReasonWhitespace},
		{"tok\t", headers.ReasonWhitespace},
		{"tök", headers.ReasonNonASCII},
	} {
		if got := headers.Check(tc.value); got != tc.want {
			t.Errorf("Check(%q) = %q, want %q", tc.value, got, tc.want)
		}
	}
}

func TestSetKeepsOneFieldPerName(t *testing.T) {
	t.Parallel()
	h := map[string]string{"authorization": "static", "X-A": "1"}
	headers.Set(h, "Authorization", "oauth")
	if len(h) != 2 || h["authorization"] != "oauth" {
		t.Fatalf("h = %v", h)
	}
	if v, ok := headers.Get(h, "AUTHORIZATION"); !ok || v != "oauth" {
		t.Errorf("Get = %q %v", v, ok)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	a := headers.Fingerprint(map[string]string{"Authorization": "x", "X-T": "1"})
	b := headers.Fingerprint(map[string]string{"x-t": "1", "authorization": "x"})
	c := headers.Fingerprint(map[string]string{"Authorization": "y", "X-T": "1"})
	if a != b || a == c {
		t.Errorf("fingerprints %s %s %s", a, b, c)
	}
}

func TestFingerprintEmpty(t *testing.T) {
	sum := sha256.Sum256(nil)
	want := hex.EncodeToString(sum[:])
	for _, h := range []map[string]string{nil, {}} {
		if got := headers.Fingerprint(h); got != want {
			t.Fatalf("Fingerprint(%v) = %s, want %s", h, got, want)
		}
	}
}
