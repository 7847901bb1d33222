package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestConnectFromTheTypeScriptSDK: the same connect flow started from an
// MCP client over /mcp. The official TypeScript SDK client declares URL
// elicitation and calls Alice's gh_whoami before she has connected; it gets
// a UrlElicitationRequiredError whose URL is the authorization link; the
// person follows it (a scripted sign-in and consent at oidc-provider) and
// the callback completes; the same client session calls again and the
// upstream sees Alice's own token (not Bob's, who connected before her
// over REST so that the catalog lists the server's tools).
func TestConnectFromTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	sdk := testkit.SDK(t)
	st := startConnectStack(t)
	if c := st.connection(t, aliceKey); c["state"] != "needs_auth" {
		t.Fatalf("alice before connecting: %v", c)
	}
	bobConnects(t, st)
	testkit.Eventually(t, 60*time.Second, "gh_whoami in alice's catalog", func() bool {
		_, body := st.rest(t, "GET", "/api/mcp/tools", aliceKey, "")
		return slices.Contains(toolNames(body), "gh_whoami")
	})

	cmd := exec.Command("node", "testdata/sdk_connect.mjs", st.base+"/mcp", "gh_whoami")
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk, "MCPBUS_KEY="+aliceKey)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	next := func(v any) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("sdk client ended: %s", stderr.String())
		}
		if err := json.Unmarshal(lines.Bytes(), v); err != nil {
			t.Fatalf("sdk client printed %q: %v", lines.Text(), err)
		}
	}
	var first struct {
		Elicitations []struct {
			Mode, URL, Message, ElicitationID string
		} `json:"elicitations"`
		Unexpected any `json:"unexpected"`
	}
	next(&first)
	if len(first.Elicitations) != 1 || first.Elicitations[0].Mode != "url" || !strings.HasPrefix(first.Elicitations[0].URL, st.issuer+"/auth?") {
		t.Fatalf("the SDK's first call: %+v", first)
	}
	back := testkit.OIDCLogin(t, first.Elicitations[0].URL, "alice")
	if status, page := callback(t, back); status != 200 || !strings.Contains(page, "Account connected") {
		t.Fatalf("callback: %d %s", status, page)
	}
	if _, err := stdin.Write([]byte("back\n")); err != nil {
		t.Fatal(err)
	}
	var second struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Headers map[string]string `json:"headers"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	next(&second)
	if second.Result.IsError || second.Result.StructuredContent.Headers["X-Demo-Oauth-Subject"] != "alice" {
		t.Fatalf("the SDK's call after connecting: %+v", second)
	}
	if c := st.connection(t, aliceKey); c["state"] != "connected" {
		t.Fatalf("alice after connecting from the SDK: %v", c)
	}
}

// bobConnects connects Bob's account over REST (the catalog then lists
// the server's tools).
func bobConnects(t *testing.T, st *connectStack) {
	t.Helper()
	c := st.connection(t, bobKey)
	link, _ := c["authorize_url"].(string)
	if status, page := callback(t, testkit.OIDCLogin(t, link, "bob")); status != 200 {
		t.Fatalf("bob's callback: %d %s", status, page)
	}
}
