package api_test

import (
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/services/api"
)

// api.mcp.catalog_ttl_seconds reaches the endpoint: its default is the
// 60 s hint, a value is taken as seconds, and 0 means ttlMs 0 (the
// mcpserver default would otherwise turn a zero into 60 s again).
func TestConfigFromCatalogTTL(t *testing.T) {
	for _, c := range []struct {
		seconds int
		want    time.Duration
	}{{60, 60 * time.Second}, {5, 5 * time.Second}, {0, -1}} {
		s := config.DefaultSettings()
		s.API.MCP.CatalogTTLSeconds = c.seconds
		if got := api.ConfigFrom(&s, "").MCP.CatalogTTL; got != c.want {
			t.Errorf("catalog_ttl_seconds %d: CatalogTTL %v, want %v", c.seconds, got, c.want)
		}
	}
}
