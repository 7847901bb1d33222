//go:build linux

package mcpclient_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// checkMinimalEnv checks that the environment of pid holds only the minimal
// base variables and the extra ones.
func checkMinimalEnv(t *testing.T, pid int, extra map[string]bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatalf("reading child environment: %v", err)
	}
	base := map[string]bool{}
	for _, k := range strings.Fields("PATH HOME USER LOGNAME SHELL LANG LC_ALL LC_CTYPE TZ TMPDIR TMP TEMP") {
		base[k] = true
	}
	for _, kv := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		k, _, _ := strings.Cut(string(kv), "=")
		if !base[k] && !extra[k] {
			t.Errorf("child environment has %s, which is neither minimal nor in Spec.Env", k)
		}
	}
}
