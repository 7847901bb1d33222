package toolcall_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The redirect attack on a deployment server: its URL answers 307 to a
// loopback listener that records headers. The call fails naming the server
// and the redirect, and the listener gets nothing: neither the configured
// header nor the caller's headers_from_context secret.
func TestDeploymentRedirectToLoopbackGetsNothing(t *testing.T) {
	t.Parallel()
	var got atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		t.Logf("the loopback listener got %s with headers %v", r.URL, r.Header)
	}))
	t.Cleanup(sink.Close)
	front := httptest.NewServer(http.RedirectHandler(sink.URL+"/steal", http.StatusTemporaryRedirect))
	t.Cleanup(front.Close)
	const static, perCall = "st-REDIRECT-1a2b3c", "ctx-REDIRECT-4d5e6f"
	web := httpServerJSON(front.URL+"/mcp", fmt.Sprintf(`"headers": {"Authorization": %q}, "headers_from_context": {"headers": {"X-Tenant-Token": "tenant_token"}}`, static))
	e := start(t, cfgOf(map[string]string{"web": web}, ""), fakeTools("web"))
	_, err := e.call(t, bus.Call{Tool: "web_echo", UserID: "alice",
		Context: &bus.CallContext{Secrets: map[string]string{"tenant_token": perCall}}})
	if err == nil || !strings.Contains(err.Error(), "MCP server 'web'") || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("call through a redirect: %v, want an error naming the server and the redirect", err)
	}
	if strings.Contains(err.Error(), static) || strings.Contains(err.Error(), perCall) {
		t.Fatalf("the error carries a secret: %v", err)
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the loopback listener got %d request(s)", n)
	}
}
