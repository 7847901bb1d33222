package bus_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// TestVisibleURIWorkedExamples are docs/federation.md's worked examples:
// each visible URI as documented, decoded back to its server and raw URI,
// and printed unchanged by Go's URL parser.
func TestVisibleURIWorkedExamples(t *testing.T) {
	for _, c := range []struct{ server, raw, visible string }{
		{"everything", "demo://resource/static/document/architecture.md", "mcpbus://everything/demo://resource/static/document/architecture.md"},
		{"everything", "demo://resource/dynamic/text/{resourceId}", "mcpbus://everything/demo://resource/dynamic/text/{resourceId}"},
		{"everything", "test://static/resource/1", "mcpbus://everything/test://static/resource/1"},
		{"weather", "ui://forecast/widget.html", "ui://weather/forecast/widget.html"},
		{"my docs", "file:///srv/a.txt", "mcpbus://~bXkgZG9jcw/file:///srv/a.txt"},
		{"files", "ui:///x", "ui://files//x"},
		{"p_0123456789ab", "notes://today", "mcpbus://p_0123456789ab/notes://today"},
	} {
		if got := bus.VisibleURI(c.server, c.raw); got != c.visible {
			t.Errorf("VisibleURI(%q, %q) = %q, want %q", c.server, c.raw, got, c.visible)
		}
		server, raw, ok := bus.ParseVisibleURI(c.visible)
		if !ok || server != c.server || raw != c.raw {
			t.Errorf("ParseVisibleURI(%q) = %q %q %v", c.visible, server, raw, ok)
		}
		if strings.Contains(c.raw, "{") {
			continue
		}
		if u, err := url.Parse(c.visible); err != nil || u.String() != c.visible {
			t.Errorf("net/url: %q → %v %v", c.visible, u, err)
		}
	}
}

// TestParseVisibleURIRefuses: URIs in neither form, without a server or
// with a token that is not one, never decode to a server.
func TestParseVisibleURIRefuses(t *testing.T) {
	for _, uri := range []string{"", "demo://greeting", "mcpbus://", "mcpbus://a", "mcpbus://a/", "mcpbus:///x", "ui://nopath", "ui:///x",
		"mcpbus://~!!/x", "mcpbus://~/x", "file:///etc/passwd", "mcpbus:/a/b"} {
		if s, r, ok := bus.ParseVisibleURI(uri); ok {
			t.Errorf("ParseVisibleURI(%q) = %q %q, want unmapped", uri, s, r)
		}
	}
	// The scheme is compared case-insensitively; the rest is kept.
	if s, r, ok := bus.ParseVisibleURI("MCPBUS://a/Demo://X?q=1#f"); !ok || s != "a" || r != "Demo://X?q=1#f" {
		t.Errorf("upper-case scheme: %q %q %v", s, r, ok)
	}
}

// FuzzVisibleURI: decoding an encoded URI gives back the server and the
// raw URI, for every server name and raw URI.
func FuzzVisibleURI(f *testing.F) {
	f.Add("everything", "demo://x")
	f.Add("my docs", "ui://a/b")
	f.Add("é/.", "")
	f.Fuzz(func(t *testing.T, server, raw string) {
		if server == "" || (raw == "" && !strings.HasPrefix(raw, "ui://")) {
			return
		}
		s, r, ok := bus.ParseVisibleURI(bus.VisibleURI(server, raw))
		if !ok || s != server || r != raw {
			t.Fatalf("round trip of (%q, %q): %q %q %v", server, raw, s, r, ok)
		}
	})
}

// TestUnmappedURINamesTheServerOnly: the error names the server it
// decoded, shortened and without control characters, never the URI.
func TestUnmappedURINamesTheServerOnly(t *testing.T) {
	e := bus.UnmappedURI("evil\nserver" + strings.Repeat("x", 100))
	if strings.Contains(e.Message, "\n") || len(e.Details["server"].(string)) != 64 || e.Code != bus.CodeNotFound {
		t.Errorf("%+v", e)
	}
}

// TestRewriteBlocks: resource links and embedded resources get visible
// URIs; text, images and the blob bytes are untouched.
func TestRewriteBlocks(t *testing.T) {
	blocks := []json.RawMessage{
		json.RawMessage(`{"type":"text","text":"see demo://x"}`),
		json.RawMessage(`{"type":"resource_link","uri":"demo://x","name":"x"}`),
		json.RawMessage(`{"type":"resource","resource":{"uri":"ui://w/a.html","blob":"AAEC/w=="}}`),
	}
	out := bus.RewriteBlocks("s", blocks)
	if string(out[0]) != `{"type":"text","text":"see demo://x"}` {
		t.Errorf("text: %s", out[0])
	}
	var link struct{ URI string }
	var emb struct{ Resource struct{ URI, Blob string } }
	_ = json.Unmarshal(out[1], &link)
	_ = json.Unmarshal(out[2], &emb)
	if link.URI != "mcpbus://s/demo://x" || emb.Resource.URI != "ui://s/w/a.html" || emb.Resource.Blob != "AAEC/w==" {
		t.Errorf("link %q, embedded %+v", link.URI, emb)
	}
	meta := bus.RewriteToolMeta("s", json.RawMessage(`{"ui":{"resourceUri":"ui://w/a.html","csp":{"x":1}},"ui/resourceUri":"ui://w/a.html"}`))
	var m struct {
		UI struct {
			ResourceURI string         `json:"resourceUri"`
			CSP         map[string]int `json:"csp"`
		} `json:"ui"`
		Flat string `json:"ui/resourceUri"`
	}
	if err := json.Unmarshal(meta, &m); err != nil || m.UI.ResourceURI != "ui://s/w/a.html" || m.Flat != "ui://s/w/a.html" || m.UI.CSP["x"] != 1 {
		t.Errorf("tool _meta: %s", meta)
	}
}
