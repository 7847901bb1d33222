package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestMCPWithTheTypeScriptSDK drives `mcpbus dev` with the official
// TypeScript SDK client (testdata/sdk_client.mjs): initialize with a
// session, tools/list page by page, a stdio and an HTTP upstream call,
// progress through onprogress, and a call cancelled with an AbortSignal
// that reaches the upstream as its own notifications/cancelled.
func TestMCPWithTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	sdk := testkit.SDK(t)
	st := startMCPStack(t)
	testkit.Eventually(t, 60*time.Second, "both servers in alice's catalog", func() bool {
		req, _ := http.NewRequest(http.MethodGet, st.base+"/api/mcp/tools", nil)
		req.Header.Set("Authorization", "Bearer "+mcpAliceKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		var names []string
		for _, tl := range body.Tools {
			names = append(names, tl.Name)
		}
		return slices.Contains(names, "demo_echo") && slices.Contains(names, "demohttp_block")
	})

	cmd := exec.Command("node", "testdata/sdk_client.mjs", st.base+"/mcp")
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk, "MCPBUS_KEY="+mcpAliceKey)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk client: %v\n%s", err, stderr.String())
	}
	var out struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Protocol         string             `json:"protocol"`
		SessionID        bool               `json:"sessionId"`
		Tools            []string           `json:"tools"`
		Pages            int                `json:"pages"`
		Echo             string             `json:"echo"`
		Add              map[string]float64 `json:"add"`
		Progress         []float64          `json:"progress"`
		ProgressMeta     map[string]any     `json:"progressMeta"`
		Blocked          string             `json:"blocked"`
		Cancelled        int                `json:"cancelled"`
		UpstreamNotified int                `json:"upstreamNotified"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("sdk client output %q: %v", raw, err)
	}
	if out.Server.Name != "mcpbus" || out.Protocol != "2025-11-25" || !out.SessionID {
		t.Errorf("initialize: server %q, protocol %q, session %v", out.Server.Name, out.Protocol, out.SessionID)
	}
	if out.Pages < 2 || !slices.Contains(out.Tools, "demo_echo") || !slices.Contains(out.Tools, "demohttp_progress") || slices.Contains(out.Tools, "demohttp_get_report_status") {
		t.Errorf("tools/list: %d pages, %v", out.Pages, out.Tools)
	}
	if out.Echo != "from the sdk" || out.Add["sum"] != 7 {
		t.Errorf("calls: echo %q, add %v", out.Echo, out.Add)
	}
	if fmt.Sprint(out.Progress) != "[1 2 3]" || fmt.Sprint(out.ProgressMeta["demo/steps"]) != "3" {
		t.Errorf("progress %v, result _meta %v", out.Progress, out.ProgressMeta)
	}
	// The demo HTTP upstream speaks 2026-07-28, whose cancellation over
	// HTTP is the aborted POST: no notifications/cancelled reaches it.
	if out.Blocked != "rejected" || out.Cancelled != 1 || out.UpstreamNotified != 0 {
		t.Errorf("cancellation: call %s, upstream cancelled %d, notified %d", out.Blocked, out.Cancelled, out.UpstreamNotified)
	}
}
