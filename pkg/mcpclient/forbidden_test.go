package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// TestForbiddenCarriesTheChallenge: a 403 with a WWW-Authenticate
// challenge (a server asking for a wider scope) fails the call with a
// *ForbiddenError holding the challenge, whatever the body, and the
// client stays usable; a 403 without a challenge is not one.
func TestForbiddenCarriesTheChallenge(t *testing.T) {
	t.Parallel()
	const challenge = `Bearer error="insufficient_scope", scope="files:write", resource_metadata="http://x/.well-known/oauth-protected-resource"`
	for _, era := range []mcpclient.Era{mcpclient.EraLegacy, mcpclient.EraModern} {
		t.Run(string(era), func(t *testing.T) {
			t.Parallel()
			inner := server.NewStreamableHTTPServer(demo.NewServer(), server.WithStateful(true))
			ts := newStreamableServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(strings.NewReader(string(body)))
				if strings.Contains(string(body), `"name":"fail"`) {
					w.Header().Set("WWW-Authenticate", challenge)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusForbidden)
					_, _ = io.WriteString(w, `{"error":"insufficient_scope"}`)
					return
				}
				if strings.Contains(string(body), `"name":"slow"`) {
					w.WriteHeader(http.StatusForbidden)
					return
				}
				inner.ServeHTTP(w, r)
			}))
			c := connect(t, mcpclient.Spec{Server: "scoped", Transport: mcpclient.TransportHTTP, URL: ts.URL, Era: era})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, "fail", json.RawMessage(`{}`), nil)
			var fe *mcpclient.ForbiddenError
			if !errors.Is(err, mcpclient.ErrForbidden) || !errors.As(err, &fe) || len(fe.Challenges) != 1 || fe.Challenges[0] != challenge {
				t.Fatalf("403 with a challenge: %v", err)
			}
			if _, err := c.CallTool(ctx, "slow", json.RawMessage(`{}`), nil); err == nil || errors.Is(err, mcpclient.ErrForbidden) {
				t.Fatalf("403 without a challenge: %v", err)
			}
			if got := text(t, call(t, c, "echo", `{"message":"still"}`, nil)); got != "still" {
				t.Fatalf("echo after the 403s = %q", got)
			}
		})
	}
}
