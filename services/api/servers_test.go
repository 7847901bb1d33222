package api_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

func TestListServersIsAdminOnlyAndRelaysDiscovery(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys()})
	var noRefresh atomic.Bool
	sub, err := e.bus.NC.Subscribe(e.bus.Names.InternalServers(), func(m *nats.Msg) {
		var req bus.ServersRequest
		_ = json.Unmarshal(m.Data, &req)
		noRefresh.Store(req.NoRefresh)
		body, _ := json.Marshal(bus.ServersReply{Generation: 3, Servers: []bus.ServerStatus{
			{Name: "demo", Enabled: true, Transport: "stdio", State: bus.ServerStateFailed, LastError: "MCP server 'demo' discovery failed", Generation: 3},
		}, Clashes: []bus.NameClash{}})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.bus.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	if status, body := e.do(t, "GET", "/api/mcp/servers", aliceKey, ""); status != http.StatusForbidden || errCode(body) != "forbidden" {
		t.Errorf("a user: %d %v, want 403 forbidden", status, body)
	}
	status, body := e.do(t, "GET", "/api/mcp/servers?refresh=false", adminKey, "")
	if status != http.StatusOK {
		t.Fatalf("admin: %d %v", status, body)
	}
	list, _ := body["servers"].([]any)
	if len(list) != 1 {
		t.Fatalf("servers = %v, want one", body["servers"])
	}
	first, _ := list[0].(map[string]any)
	if body["generation"] != float64(3) || first["state"] != "failed" || first["transport"] != "stdio" {
		t.Errorf("body = %v", body)
	}
	if !noRefresh.Load() {
		t.Error("refresh=false was not passed on")
	}
}
