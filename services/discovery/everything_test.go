package discovery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// directTools lists a server's tools with the adapter directly.
func directTools(t *testing.T, spec mcpclient.Spec) map[string]mcpclient.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, spec)
	if err != nil {
		t.Fatalf("direct connect to %s: %v", spec.Server, err)
	}
	defer func() { _ = c.Close() }()
	list, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mcpclient.Tool{}
	for _, tl := range list {
		out[tl.Name] = tl
	}
	return out
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestServerEverythingOverStdioSSEAndStreamableHTTP(t *testing.T) {
	t.Parallel()
	entry := testkit.Everything(t)
	sseURL := testkit.ServeEverything(t, "sse") + "/sse"
	httpURL := testkit.ServeEverything(t, "streamableHttp") + "/mcp"
	b := start(t, cfgOf(
		srvJSON{"everything", fmt.Sprintf(`{"type": "stdio", "command": "node", "args": [%q, "stdio"]}`, entry)},
		srvJSON{"everything-sse", fmt.Sprintf(`{"type": "sse", "url": %q}`, sseURL)},
		srvJSON{"everything-http", httpServer(httpURL, "")},
	))
	r := mustList(t, b)
	if len(r.FailedServers) != 0 {
		t.Fatalf("failed servers: %+v", r.FailedServers)
	}
	want := directTools(t, mcpclient.Spec{Server: "direct", Transport: "stdio", Command: "node", Args: []string{entry, "stdio"}})
	for _, tool := range []string{"echo", "get-sum"} {
		if _, ok := want[tool]; !ok {
			t.Fatalf("server-everything has no %s tool", tool)
		}
	}
	for _, prefix := range []string{"everything", "everything-sse", "everything-http"} {
		n := 0
		for _, tl := range r.Tools {
			if tl.Server != prefix {
				continue
			}
			n++
			w, ok := want[tl.OriginalName]
			if !ok || tl.Name != prefix+"_"+tl.OriginalName {
				t.Errorf("%s: unexpected tool %s (%s)", prefix, tl.Name, tl.OriginalName)
				continue
			}
			if !jsonEqual(tl.InputSchema, w.InputSchema) || tl.Description != w.Description {
				t.Errorf("%s: schema or description of %s changed:\n got %s\nwant %s", prefix, tl.Name, tl.InputSchema, w.InputSchema)
			}
			if len(w.OutputSchema) > 0 && !jsonEqual(tl.OutputSchema, w.OutputSchema) {
				t.Errorf("%s: output schema of %s changed", prefix, tl.Name)
			}
		}
		if n != len(want) {
			t.Errorf("%s lists %d tools, the server has %d", prefix, n, len(want))
		}
	}
	if !hasTool(r, "everything-http_get-sum") || !hasTool(r, "everything-sse_echo") {
		t.Errorf("catalog lacks prefixed names: %v", names(r))
	}
}
