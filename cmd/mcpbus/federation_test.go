package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// fedStack is `mcpbus dev` fronting the demo server with -federation five
// times (a and b with the name prefix, the same raw URIs and their own
// content; c and d without it, so their prompt greet clashes; secret,
// which the guardrails deny) and server-everything over stdio.
type fedStack struct {
	dir, base, natsURL string
}

const fedKey = "fed-alice-key"

func startFedStack(t *testing.T) *fedStack {
	t.Helper()
	dir := t.TempDir()
	entry := testkit.Everything(t)
	demoSrv := func(instance string, prefix bool) string {
		return fmt.Sprintf(`{"type": "stdio", "command": %q, "args": ["-federation"], "env": {"DEMO_INSTANCE": %q}, "tool_name_prefix": %v}`, demoBin, instance, prefix)
	}
	ext := fmt.Sprintf(`{"mcpServers": {"a": %s, "b": %s, "c": %s, "d": %s, "secret": %s,
		"everything": {"type": "stdio", "command": "node", "args": [%q, "stdio"]}}}`,
		demoSrv("A", true), demoSrv("B", true), demoSrv("C", false), demoSrv("D", false), demoSrv("SECRET", true), entry)
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	settings := fmt.Sprintf(`api:
  listen: %s
  mcp:
    page_size: 3
  keys:
    - {sha256: %s, user_id: alice, role: admin}
guardrails:
  enabled: true
  provider:
    use: allowlist
    config:
      denied_tools: ["server:secret"]
`, apiAddr, sha(fedKey))
	dev := startDevIn(t, dir, ext, settings)
	t.Cleanup(func() { dev.stop(t) })
	st := &fedStack{dir: dir, base: "http://" + apiAddr, natsURL: devNATSURL(t, dir)}
	testkit.Eventually(t, 120*time.Second, "every server's resources listed", func() bool {
		var body struct {
			Resources []struct {
				Server string `json:"server"`
			} `json:"resources"`
		}
		if st.rest(t, http.MethodGet, "/api/mcp/resources", "", &body) != http.StatusOK {
			return false
		}
		seen := map[string]bool{}
		for _, r := range body.Resources {
			seen[r.Server] = true
		}
		return seen["a"] && seen["b"] && seen["c"] && seen["d"] && seen["everything"]
	})
	return st
}

// rest sends a REST request as alice and decodes the reply into out.
func (st *fedStack) rest(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, st.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fedKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(b, out)
	}
	return resp.StatusCode
}

// fedOut is what testdata/fed_client.mjs prints.
type fedOut struct {
	Capabilities      map[string]any    `json:"capabilities"`
	Resources         []string          `json:"resources"`
	Templates         []string          `json:"templates"`
	Prompts           []string          `json:"prompts"`
	ReadA             string            `json:"readA"`
	ReadB             string            `json:"readB"`
	Blob              map[string]string `json:"blob"`
	Note              string            `json:"note"`
	WidgetResourceURI string            `json:"widgetResourceUri"`
	Widget            struct {
		URI, MimeType, Text string
		Meta                map[string]any `json:"meta"`
	} `json:"widget"`
	WidgetListedMime    string         `json:"widgetListedMime"`
	Prompt              []string       `json:"prompt"`
	CompletePrompt      []string       `json:"completePrompt"`
	CompleteTemplate    []string       `json:"completeTemplate"`
	Link                string         `json:"link"`
	Embedded            string         `json:"embedded"`
	LinkRead            string         `json:"linkRead"`
	EverythingResources int            `json:"everythingResources"`
	EverythingRead      map[string]any `json:"everythingRead"`
	EverythingPrompt    map[string]any `json:"everythingPrompt"`
	EverythingLink      map[string]any `json:"everythingLink"`
	Forged              *rpcErr        `json:"forged"`
	NotMapped           *rpcErr        `json:"notMapped"`
	Denied              *rpcErr        `json:"denied"`
	DeniedPrompt        *rpcErr        `json:"deniedPrompt"`
	UnknownPrompt       *rpcErr        `json:"unknownPrompt"`
}

type rpcErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// TestFederationWithTheTypeScriptSDK drives the federation with the
// official TypeScript SDK over /mcp and over /sse: lists, reads (text,
// blob, template, MCP Apps), a prompt with arguments, completions, a
// resource_link followed, server-everything's resources and prompts, the
// collision of two servers' same raw URI (each read its own server's
// content), and the attacks: a forged server, a URI in neither form and a
// guardrail-denied server neither listed nor readable.
func TestFederationWithTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	sdk := testkit.SDK(t)
	st := startFedStack(t)
	for _, tr := range []struct{ name, path string }{{"streamable", "/mcp"}, {"sse", "/sse"}} {
		t.Run(tr.name, func(t *testing.T) {
			cmd := exec.Command("node", "testdata/fed_client.mjs", st.base+tr.path, tr.name)
			cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk, "MCPBUS_KEY="+fedKey)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			raw, err := cmd.Output()
			if err != nil {
				t.Fatalf("sdk client: %v\n%s", err, stderr.String())
			}
			var out fedOut
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("sdk client output %q: %v", raw, err)
			}
			checkFedOut(t, out)
		})
	}
}

func checkFedOut(t *testing.T, out fedOut) {
	t.Helper()
	for _, k := range []string{"resources", "prompts", "completions"} {
		if _, ok := out.Capabilities[k]; !ok {
			t.Errorf("capabilities lack %s: %v", k, out.Capabilities)
		}
	}
	for _, uri := range []string{"mcpbus://a/demo://greeting", "mcpbus://b/demo://greeting", "ui://a/widget/app.html", "demo://greeting"} {
		if !slices.Contains(out.Resources, uri) {
			t.Errorf("resources/list lacks %s: %v", uri, out.Resources)
		}
	}
	for _, uri := range out.Resources {
		if strings.Contains(uri, "secret") {
			t.Errorf("the denied server's resource %s is listed", uri)
		}
	}
	if !slices.Contains(out.Templates, "mcpbus://a/demo://notes/{id}") {
		t.Errorf("templates: %v", out.Templates)
	}
	if !slices.Contains(out.Prompts, "a_greet") || !slices.Contains(out.Prompts, "greet") || slices.Contains(out.Prompts, "secret_greet") {
		t.Errorf("prompts: %v", out.Prompts)
	}
	// The collision: both servers' demo://greeting reachable, each its own.
	if out.ReadA != "hello from A" || out.ReadB != "hello from B" {
		t.Errorf("reads of the same raw URI: a %q, b %q", out.ReadA, out.ReadB)
	}
	if out.Blob["uri"] != "mcpbus://a/demo://blob" || out.Blob["blob"] != base64.StdEncoding.EncodeToString(demo.BlobBytes) {
		t.Errorf("blob: %v", out.Blob)
	}
	if out.Note != "note 7 from A" {
		t.Errorf("template read: %q", out.Note)
	}
	if out.WidgetResourceURI != "ui://a/widget/app.html" || out.Widget.URI != "ui://a/widget/app.html" || out.Widget.MimeType != demo.AppMIMEType ||
		out.WidgetListedMime != demo.AppMIMEType || fmt.Sprint(out.Widget.Meta) != fmt.Sprint(demo.WidgetMeta) || !strings.Contains(out.Widget.Text, "A") {
		t.Errorf("MCP App: %q %+v listed %q", out.WidgetResourceURI, out.Widget, out.WidgetListedMime)
	}
	if len(out.Prompt) != 2 || out.Prompt[0] != "Hello, Paris! (A)" || out.Prompt[1] != "mcpbus://a/demo://greeting" {
		t.Errorf("prompts/get: %v", out.Prompt)
	}
	if fmt.Sprint(out.CompletePrompt) != "[Alice Albert]" || fmt.Sprint(out.CompleteTemplate) != "[alpha alpine]" {
		t.Errorf("completions: %v %v", out.CompletePrompt, out.CompleteTemplate)
	}
	if out.Link != "mcpbus://a/demo://greeting" || out.Embedded != "mcpbus://a/demo://greeting" || out.LinkRead != "hello from A" {
		t.Errorf("resource_link %q, embedded %q, read %q", out.Link, out.Embedded, out.LinkRead)
	}
	if out.EverythingResources == 0 || out.EverythingRead["uri"] != out.EverythingRead["listed"] || out.EverythingRead["hasBody"] != true {
		t.Errorf("server-everything resources: %d, read %v", out.EverythingResources, out.EverythingRead)
	}
	if out.EverythingPrompt == nil || !strings.Contains(fmt.Sprint(out.EverythingPrompt["text"]), "Paris") {
		t.Errorf("server-everything prompt: %v", out.EverythingPrompt)
	}
	if out.EverythingLink == nil || out.EverythingLink["uri"] != out.EverythingLink["read"] || out.EverythingLink["hasBody"] != true ||
		!strings.HasPrefix(fmt.Sprint(out.EverythingLink["uri"]), "mcpbus://everything/") {
		t.Errorf("server-everything resource_link: %v", out.EverythingLink)
	}
	// The attacks.
	if e := out.Forged; e == nil || e.Code != -32602 || !strings.Contains(e.Message, "'nosuch'") || strings.Contains(e.Message, "s3cret") {
		t.Errorf("a URI naming another server: %+v", e)
	}
	if e := out.NotMapped; e == nil || e.Code != -32602 {
		t.Errorf("a URI in neither form: %+v", e)
	}
	if e := out.Denied; e == nil || !strings.Contains(e.Message, "Guardrail denied") || strings.Contains(e.Message, "SECRET") {
		t.Errorf("a guardrail-denied server's resource: %+v", e)
	}
	if e := out.DeniedPrompt; e == nil || strings.Contains(e.Message, "SECRET") {
		t.Errorf("a guardrail-denied server's prompt: %+v", e)
	}
	if e := out.UnknownPrompt; e == nil || e.Code != -32602 {
		t.Errorf("an unknown prompt: %+v", e)
	}
}

// TestFederationRESTAndStdio: the REST routes (lists, a read, a prompt,
// a completion, 404 for a forged URI, 403 for a denied server, the clash
// report) and mcp-go over `mcpbus stdio`.
func TestFederationRESTAndStdio(t *testing.T) {
	t.Parallel()
	st := startFedStack(t)

	var read struct {
		URI      string            `json:"uri"`
		Server   string            `json:"server"`
		Contents []json.RawMessage `json:"contents"`
	}
	if code := st.rest(t, http.MethodPost, "/api/mcp/resources/read", `{"uri": "mcpbus://b/demo://greeting"}`, &read); code != http.StatusOK ||
		read.Server != "b" || len(read.Contents) != 1 || !strings.Contains(string(read.Contents[0]), "hello from B") {
		t.Errorf("REST read: %d %+v", code, read)
	}
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if code := st.rest(t, http.MethodPost, "/api/mcp/resources/read", `{"uri": "mcpbus://nosuch/x?token=s3cret"}`, &e); code != http.StatusNotFound ||
		e.Error.Code != "not_found" || e.Error.Details["server"] != "nosuch" || strings.Contains(e.Error.Message, "s3cret") {
		t.Errorf("REST forged URI: %d %+v", code, e)
	}
	// A personal connection's runtime name that is not one of alice's.
	if code := st.rest(t, http.MethodPost, "/api/mcp/resources/read", `{"uri": "mcpbus://p_0123456789ab/demo://greeting"}`, &e); code != http.StatusNotFound || e.Error.Code != "not_found" {
		t.Errorf("REST read of a personal server that is not the caller's: %d %+v", code, e)
	}
	if code := st.rest(t, http.MethodPost, "/api/mcp/resources/read", `{"uri": "mcpbus://secret/demo://greeting"}`, &e); code != http.StatusForbidden || e.Error.Code != "guardrail_denied" {
		t.Errorf("REST denied server: %d %+v", code, e)
	}
	var got struct {
		Name     string            `json:"name"`
		Server   string            `json:"server"`
		Messages []json.RawMessage `json:"messages"`
	}
	if code := st.rest(t, http.MethodPost, "/api/mcp/prompts/greet", `{"arguments": {"name": "Bo"}}`, &got); code != http.StatusOK ||
		got.Server != "c" || len(got.Messages) == 0 || !strings.Contains(string(got.Messages[0]), "Hello, Bo! (C)") {
		t.Errorf("REST prompt of the clash winner: %d %+v", code, got)
	}
	if code := st.rest(t, http.MethodPost, "/api/mcp/prompts/a_greet", `{"arguments": {"name": 3}}`, &e); code != http.StatusBadRequest || !strings.Contains(e.Error.Message, "arguments.name") {
		t.Errorf("REST prompt with a bad argument: %d %+v", code, e)
	}
	var comp struct {
		Server     string `json:"server"`
		Completion struct {
			Values []string `json:"values"`
		} `json:"completion"`
	}
	if code := st.rest(t, http.MethodPost, "/api/mcp/completion", `{"ref": {"type": "ref/prompt", "name": "a_greet"}, "argument": {"name": "name", "value": "B"}}`, &comp); code != http.StatusOK ||
		comp.Server != "a" || fmt.Sprint(comp.Completion.Values) != "[Bob]" {
		t.Errorf("REST completion: %d %+v", code, comp)
	}
	var servers struct {
		Clashes []struct {
			Kind, Name, Winner, Loser string
		} `json:"clashes"`
	}
	if code := st.rest(t, http.MethodGet, "/api/mcp/servers", "", &servers); code != http.StatusOK {
		t.Fatalf("servers: %d", code)
	}
	var kinds []string
	for _, c := range servers.Clashes {
		if c.Kind != "" {
			kinds = append(kinds, c.Kind+":"+c.Name+":"+c.Winner+">"+c.Loser)
		}
	}
	for _, want := range []string{"prompt:greet:c>d", "resource:demo://greeting:a>b"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("clash %s not reported: %v", want, kinds)
		}
	}

	// mcp-go over `mcpbus stdio`.
	c := mcpbusStdio(t, st.dir, st.natsURL, "alice", "desk")
	initialized(t, c, mcp.ProtocolVersion20251125)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "mcpbus://b/demo://notes/x"}})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("stdio read: %+v %v", res, err)
	}
	if tc, ok := res.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != "note x from B" || tc.URI != "mcpbus://b/demo://notes/x" {
		t.Errorf("stdio read: %+v", res.Contents[0])
	}
	p, err := c.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "b_greet", Arguments: map[string]string{"name": "Eve"}}})
	if err != nil || len(p.Messages) == 0 {
		t.Fatalf("stdio prompt: %+v %v", p, err)
	}
	if tc, ok := p.Messages[0].Content.(mcp.TextContent); !ok || tc.Text != "Hello, Eve! (B)" {
		t.Errorf("stdio prompt: %+v", p.Messages[0])
	}
	cr, err := c.Complete(ctx, mcp.CompleteRequest{Params: mcp.CompleteParams{
		Ref: mcp.ResourceReference{Type: "ref/resource", URI: "mcpbus://b/demo://notes/{id}"}, Argument: mcp.CompleteArgument{Name: "id", Value: "b"}}})
	if err != nil || fmt.Sprint(cr.Completion.Values) != "[beta]" {
		t.Errorf("stdio completion: %+v %v", cr, err)
	}
	if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "mcpbus://secret/demo://greeting"}}); err == nil {
		t.Error("stdio read of a denied server answered")
	}
}
