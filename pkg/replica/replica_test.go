package replica

import (
	"regexp"
	"testing"
)

func TestIDIsOneSubjectTokenAndUnique(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9-]+-[0-9a-f]{12}$`)
	for _, host := range []string{"", "web.example.com", "a b*c>d", "h"} {
		a, b := idFor(host), idFor(host)
		if !valid.MatchString(a) {
			t.Errorf("id for host %q: %q is not one token of letters, digits and '-'", host, a)
		}
		if a == b {
			t.Errorf("two ids for host %q are equal: %q", host, a)
		}
	}
	if id := NewID(); !valid.MatchString(id) {
		t.Errorf("NewID: %q", id)
	}
}
