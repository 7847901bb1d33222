package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestNoDeploymentSecretReachesUsersOrLogs is issue 11 item 6 as an
// attack on `mcpbus dev` (all five services, debug logs): deployment
// servers carry secrets in a URL query, URL userinfo, a header value, an
// env value ($VAR-expanded) and an argument that the child prints to
// stderr, an OAuth client secret and a token_url query. Each kind fails once in discovery
// and once in a tool call (the upstream, which echoes the request's URL and
// headers in its errors, the token endpoint, which echoes the client
// secret, and the stdio child go bad after discovery). A plain user's
// catalog (REST and the mcpbus.tools.list NATS reply), the tool-call errors
// (REST and NATS), the admin's server status and every log line of every
// service are then searched for every secret value. Admins see the stdio
// server's stderr tail, redacted; plain users never see stderr at all.
func TestNoDeploymentSecretReachesUsersOrLogs(t *testing.T) {
	t.Parallel()
	const (
		querySecret  = "q-SEKRET-71a1" // ?api_key=
		userSecret   = "u-SEKRET-71b2" // userinfo user name
		passSecret   = "p-SEKRET-71c3" // userinfo password
		headerSecret = "h-SEKRET-71d4" // headers value
		envSecret    = "e-SEKRET-71e5" // env value, from $MCPBUS_TEST_SECRET_ENV
		clientSecret = "o-SEKRET-71f6" // oauth.client_secret
		tokenQuery   = "t-SEKRET-71g7" // oauth.token_url ?tenant_key=
		accessToken  = "a-SEKRET-71h8" // the token endpoint's access token
		argSecret    = "g-SEKRET-71i9" // args: --api-key=…
		adminKey     = "secrets-admin-key-1"
		aliceKey     = "secrets-alice-key-2"
		stderrText   = "starting with token"
	)
	secrets := []string{querySecret, userSecret, passSecret, headerSecret, envSecret, clientSecret, tokenQuery, accessToken, argSecret}
	dir := t.TempDir()

	// A real MCP server over streamable HTTP behind a proxy that turns
	// into an upstream echoing each request (URL, headers) in a 500 once
	// failing is set (at once under /down/), and a token endpoint that
	// echoes the client secret in its refusal once failing is set.
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-http", demoBin, "-transport", "http", "-addr", demoAddr)
	testkit.Eventually(t, 30*time.Second, "the demo server listening", func() bool {
		c, err := net.Dial("tcp", demoAddr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	var failing atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: demoAddr})
	proxy.FlushInterval = -1
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "upstream error for %s %s with headers %v", r.Method, r.URL, r.Header)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/up/", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			echo(w, r)
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/up")
		proxy.ServeHTTP(w, r)
	})
	mux.HandleFunc("/down/", echo)
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if failing.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client",
				"error_description": fmt.Sprintf("client_secret %s is not valid at %s", r.PostForm.Get("client_secret"), r.URL)})
			return
		}
		// expires_in 1 is inside the refresh skew: every use fetches again.
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": accessToken, "token_type": "Bearer", "expires_in": 1})
	})
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	upHost := strings.TrimPrefix(up.URL, "http://")
	closed := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // nothing listens: connection refused

	// A stdio server that prints its env secret to stderr, then serves
	// the demo server unless its flag file exists.
	script := filepath.Join(dir, "noisy-server.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \""+stderrText+" $API_TOKEN $3\" >&2\nif [ -e \"$1\" ]; then exit 3; fi\nexec \"$2\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	flagLater, flagNow := filepath.Join(dir, "flag-later"), filepath.Join(dir, "flag-now")
	if err := os.WriteFile(flagNow, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	oauth := func(tokenURL string) string {
		return fmt.Sprintf(`{"enabled": true, "token_url": %q, "grant_type": "client_credentials", "client_id": "mcpbus", "client_secret": %q}`, tokenURL, clientSecret)
	}
	stdio := func(flag string) string {
		return fmt.Sprintf(`{"command": %q, "args": [%q, %q, "--api-key=%s"], "env": {"API_TOKEN": "$MCPBUS_TEST_SECRET_ENV"}}`, script, flag, demoBin, argSecret)
	}
	servers := map[string]string{
		// Discovered, then failing in tool calls.
		"q": fmt.Sprintf(`{"type": "http", "url": "%s/up/mcp?api_key=%s"}`, up.URL, querySecret),
		"u": fmt.Sprintf(`{"type": "http", "url": "http://%s:%s@%s/up/mcp"}`, userSecret, passSecret, upHost),
		"h": fmt.Sprintf(`{"type": "http", "url": "%s/up/mcp", "headers": {"X-Api-Key": %q}}`, up.URL, headerSecret),
		"e": stdio(flagLater),
		"o": fmt.Sprintf(`{"type": "http", "url": "%s/up/mcp", "oauth": %s}`, up.URL, oauth(up.URL+"/token?tenant_key="+tokenQuery)),
		// Failing discovery.
		"qdown": fmt.Sprintf(`{"type": "http", "url": "http://%s/mcp?api_key=%s"}`, closed, querySecret),
		"udown": fmt.Sprintf(`{"type": "sse", "url": "http://%s:%s@%s/sse"}`, userSecret, passSecret, closed),
		"hdown": fmt.Sprintf(`{"type": "http", "url": "%s/down/mcp", "headers": {"X-Api-Key": %q}}`, up.URL, headerSecret),
		"edown": stdio(flagNow),
		"odown": fmt.Sprintf(`{"type": "http", "url": "%s/down/mcp", "oauth": %s}`, up.URL, oauth("http://"+closed+"/token?tenant_key="+tokenQuery)),
	}
	var entries []string
	for name, entry := range servers {
		entries = append(entries, fmt.Sprintf("%q: %s", name, entry))
	}
	ext := `{"mcpServers": {` + strings.Join(entries, ",\n") + `}}`
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	sum := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	settings := fmt.Sprintf("api:\n  listen: %s\n  keys:\n    - {sha256: %s, user_id: root, role: admin}\n    - {sha256: %s, user_id: alice, role: user}\nlog:\n  level: debug\n",
		apiAddr, sum(adminKey), sum(aliceKey))
	dev := startDevIn(t, dir, ext, settings, "MCPBUS_TEST_SECRET_ENV="+envSecret)
	base := "http://" + apiAddr
	var seen []string // everything a plain user was shown
	call := func(key, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(mcpbusBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=")
		out, _ := cmd.CombinedOutput()
		return string(out)
	}

	// Discovery: the five "down" servers fail, the others are listed.
	var catalog struct {
		Tools         []struct{ Name string }
		FailedServers []struct{ Server, Error string } `json:"failed_servers"`
	}
	var tools string
	testkit.Eventually(t, 90*time.Second, "alice's catalog with every server discovered or failed", func() bool {
		status, body := call(aliceKey, "GET", "/api/mcp/tools", "")
		tools = body
		if status != http.StatusOK || json.Unmarshal([]byte(body), &catalog) != nil {
			return false
		}
		var listed, failed []string
		for _, tl := range catalog.Tools {
			listed = append(listed, tl.Name)
		}
		for _, f := range catalog.FailedServers {
			failed = append(failed, f.Server)
		}
		slices.Sort(failed)
		return slices.Equal(failed, []string{"edown", "hdown", "odown", "qdown", "udown"}) &&
			slices.Contains(listed, "q_echo") && slices.Contains(listed, "u_echo") && slices.Contains(listed, "h_echo") &&
			slices.Contains(listed, "e_echo") && slices.Contains(listed, "o_echo")
	})
	seen = append(seen, tools)
	for _, f := range catalog.FailedServers {
		if !strings.Contains(f.Error, "'"+f.Server+"'") {
			t.Errorf("failed_servers entry of %s does not name it: %s", f.Server, f.Error)
		}
	}
	natsList := cli("tools", "list", "--json", "--user", "alice")
	if !strings.Contains(natsList, `"failed_servers"`) || !strings.Contains(natsList, "qdown") {
		t.Fatalf("mcpbus tools --json: %s", natsList)
	}
	seen = append(seen, natsList)

	// Tool calls: every discovered server goes bad.
	failing.Store(true)
	if err := os.WriteFile(flagLater, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"q_echo", "u_echo", "h_echo", "e_echo", "o_echo"} {
		status, body := call(aliceKey, "POST", "/api/mcp/tools/"+tool+"/call", `{"arguments": {"message": "hi"}}`)
		if status < 500 || !strings.Contains(body, `"error"`) {
			t.Errorf("REST call of %s: %d %s, want an upstream failure", tool, status, body)
		}
		seen = append(seen, body)
		out := cli("call", "--user", "alice", "--thread", "nats", tool, `{"message": "hi"}`)
		if !strings.Contains(out, "'"+strings.TrimSuffix(tool, "_echo")+"'") {
			t.Errorf("NATS call of %s: %s, want an error naming the server", tool, out)
		}
		seen = append(seen, out)
	}

	// The admin sees the stdio server's stderr, redacted.
	status, servers2 := call(adminKey, "GET", "/api/mcp/servers?refresh=false", "")
	if status != http.StatusOK || !strings.Contains(servers2, stderrText+" ***") {
		t.Errorf("admin server status: %d %s, want edown's stderr tail, redacted", status, servers2)
	}

	shown := strings.Join(seen, "\n")
	if strings.Contains(shown, stderrText) {
		t.Errorf("a plain user was shown a server's stderr:\n%s", shown)
	}
	logs := dev.out.String()
	if !strings.Contains(logs, "mcp server stderr") || !strings.Contains(logs, "server discovery failed") {
		t.Fatalf("the logs are not the debug logs of the services:\n%s", logs)
	}
	for _, s := range secrets {
		for what, text := range map[string]string{"a plain user's view": shown, "the admin's server status": servers2, "the logs": logs} {
			if strings.Contains(text, s) {
				t.Errorf("%s contains %s", what, s)
			}
		}
	}
	// Absolute URLs lose their query; a path the upstream echoes keeps its
	// query's names, never their values.
	all := shown + servers2 + logs
	for _, s := range []string{"api_key=", "tenant_key="} {
		if n := strings.Count(all, s); n != strings.Count(all, s+"***") {
			t.Errorf("a URL query value (%s) was shown or logged", s)
		}
	}
	if strings.Contains(all, closed+"/mcp?") || !strings.Contains(shown, closed+"/mcp") {
		t.Errorf("the URL of qdown kept its query string, or was lost:\n%s", shown)
	}
	if t.Failed() {
		t.Logf("shown to alice:\n%s\n\nadmin status:\n%s", shown, servers2)
	}
}
