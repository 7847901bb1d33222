package observability_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/observability"
)

// TestLoggerDropsURLCredentials: whatever a service logs, a URL in it loses
// its userinfo and query string, in text and JSON output alike.
func TestLoggerDropsURLCredentials(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log := observability.NewLogger(&buf, "info", format).With("base", "nats://user:pw-SEKRET@nats:4222")
		log.Info("cannot reach https://h/x?api_key=q-SEKRET", observability.Err(errors.New(`Post "https://u-SEKRET:p@h/mcp?token=t-SEKRET": refused`)), "url", "https://h/sse?k=k-SEKRET")
		out := buf.String()
		if strings.Contains(out, "SEKRET") || !strings.Contains(out, "https://h/mcp") || !strings.Contains(out, "nats://nats:4222") {
			t.Errorf("%s: %s", format, out)
		}
	}
}
