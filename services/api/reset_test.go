package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCacheResetRefusedSays503WithRetryAfter: when discovery cannot write
// the new generation (no KV leader), POST /api/mcp/cache/reset answers 503
// with the code unavailable, the reason, and a Retry-After header; never a
// 200.
func TestCacheResetRefusedSays503WithRetryAfter(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{resetUnavailable: true})
	req, err := http.NewRequest("POST", e.base+"/api/mcp/cache/reset", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || body.Error.Code != "unavailable" || !strings.Contains(body.Error.Message, "not reset") {
		t.Fatalf("reset refused by discovery: %d %+v; want 503 unavailable saying nothing was reset", resp.StatusCode, body.Error)
	}
	if got := resp.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
}
