package toolcall_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// TestResultsPassThrough: every content block kind passes through, the
// resource_link's and the embedded resource's URIs made visible (they
// name a resource of that server: docs/federation.md).
func TestResultsPassThrough(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry, "web": httpServerJSON(f.URL, "")}, ""), append(fakeTools("fake"), fakeTools("web")...))
	for _, server := range []string{"fake", "web"} {
		r := e.mustCall(t, bus.Call{Tool: server + "_content"})
		want := []struct{ typ, field, value string }{
			{"text", "text", "hello"},
			{"image", "mimeType", "image/png"},
			{"audio", "mimeType", "audio/wav"},
			{"resource_link", "uri", "mcpbus://" + server + "/file:///tmp/report.txt"},
			{"resource", "", ""},
		}
		if len(r.Content) != len(want) {
			t.Fatalf("%s: %d blocks: %s", server, len(r.Content), r.Content)
		}
		for i, w := range want {
			var b map[string]any
			if err := json.Unmarshal(r.Content[i], &b); err != nil {
				t.Fatal(err)
			}
			if b["type"] != w.typ || (w.field != "" && b[w.field] != w.value) {
				t.Errorf("%s block %d = %s, want type %s", server, i, r.Content[i], w.typ)
			}
		}
		var res struct {
			Resource struct{ URI, Text string }
		}
		_ = json.Unmarshal(r.Content[4], &res)
		if res.Resource.URI != "mcpbus://"+server+"/mem://note" || res.Resource.Text != "embedded" {
			t.Errorf("%s embedded resource = %s", server, r.Content[4])
		}
		var sc struct {
			N  int
			OK bool
		}
		if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.N != 5 || !sc.OK || r.IsError {
			t.Errorf("%s structured_content = %s, is_error %v", server, r.StructuredContent, r.IsError)
		}
		r = e.mustCall(t, bus.Call{Tool: server + "_fail", Arguments: json.RawMessage(`{"message":"tool said no"}`)})
		if !r.IsError || text(t, r) != "tool said no" {
			t.Errorf("%s fail = %+v", server, r)
		}
	}
}
