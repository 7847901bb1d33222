package replica

import (
	"regexp"
	"testing"
)

func TestIDIsOneSubjectTokenAndUnique(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9-]+-[0-9]+-[0-9a-f]{12}$`)
	for _, host := range []string{"", "web.example.com", "a b*c>d", "h"} {
		a, b := idFor(host, 4242), idFor(host, 4242)
		if !valid.MatchString(a) {
			t.Errorf("id for host %q: %q is not one token of letters, digits and '-'", host, a)
		}
		if PID(a) != 4242 {
			t.Errorf("PID(%q) = %d, want 4242", a, PID(a))
		}
		if a == b {
			t.Errorf("two ids for host %q are equal: %q", host, a)
		}
	}
	if PID("not-an-id") != 0 {
		t.Error("PID of a foreign string")
	}
	if id := NewID(); !valid.MatchString(id) {
		t.Errorf("NewID: %q", id)
	}
}
