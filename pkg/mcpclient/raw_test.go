package mcpclient_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// rawFakeEnv re-executes the test binary as a hand-written stdio server
// whose tools/call result carries what no typed MCP library models: a block
// of a kind from the future, annotations and _meta on blocks, and extra
// fields.
const rawFakeEnv = "MCPCLIENT_RAW_FAKE"

// rawVersionEnv, when set, makes the raw fake a server of that (older)
// revision: initialize answers with it and server/discover is unknown.
const rawVersionEnv = "MCPCLIENT_RAW_VERSION"

// rawIgnoreDiscoverEnv=1 makes the raw fake leave server/discover
// unanswered, as some servers from before 2026-07-28 do.
const rawIgnoreDiscoverEnv = "MCPCLIENT_RAW_IGNORE_DISCOVER"

// rawResult is the result the raw fake answers every tools/call with.
const rawResult = `{"content":[` +
	`{"type":"text","text":"hi","annotations":{"audience":["user"],"priority":0.5},"_meta":{"k":"v"}},` +
	`{"type":"hologram","frames":[1,2,3],"fps":24},` +
	`{"type":"image","data":"aW1n","mimeType":"image/png","x-extra":{"deep":[true,null]}}` +
	`],"structuredContent":{"n":1},"isError":false,"_meta":{"trace":"t-1"},"futureField":42}`

func serveRawFake() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue // notifications
		}
		var result string
		version := os.Getenv(rawVersionEnv)
		if version == "" {
			version = "2025-11-25"
		}
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"` + version + `","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
		case "server/discover":
			if os.Getenv(rawIgnoreDiscoverEnv) == "1" {
				continue // never answered
			}
			if os.Getenv(rawVersionEnv) != "" {
				// A server from before 2026-07-28 does not know the method.
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`+"\n", m.ID)
				continue
			}
			result = `{}`
		case "tools/call":
			result = rawResult
		default:
			result = `{}`
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
	}
}

// Content blocks, structuredContent and _meta reach the caller as the
// server sent them, whatever their kind and fields.
func TestCallResultsPassThroughAsSent(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, mcpclient.Spec{Server: "raw", Command: exe, Env: map[string]string{rawFakeEnv: "1"}})
	res := call(t, c, "anything", `{}`, nil)
	var want struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		Meta              json.RawMessage   `json:"_meta"`
	}
	if err := json.Unmarshal([]byte(rawResult), &want); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != len(want.Content) {
		t.Fatalf("%d blocks, want %d: %s", len(res.Content), len(want.Content), res.Content)
	}
	for i := range want.Content {
		if !bytes.Equal(res.Content[i], want.Content[i]) {
			t.Errorf("block %d = %s, want %s", i, res.Content[i], want.Content[i])
		}
	}
	if !bytes.Equal(res.StructuredContent, want.StructuredContent) || !bytes.Equal(res.Meta, want.Meta) || res.IsError {
		t.Errorf("structured %s, _meta %s, is_error %v", res.StructuredContent, res.Meta, res.IsError)
	}
}

// Servers of older revisions, which do not know server/discover, are
// spoken to in the legacy era at the version they answer initialize with.
func TestOlderRevisions(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2025-06-18", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			c := connect(t, mcpclient.Spec{Server: "raw-" + version, Command: exe, Dir: t.TempDir(), Env: map[string]string{rawFakeEnv: "1", rawVersionEnv: version}})
			if info := c.ServerInfo(); info.Era != mcpclient.EraLegacy || info.ProtocolVersion != version {
				t.Errorf("ServerInfo = %+v, want legacy at %s", info, version)
			}
			if res := call(t, c, "anything", `{}`, nil); string(res.StructuredContent) != `{"n":1}` {
				t.Errorf("structured content = %s", res.StructuredContent)
			}
		})
	}
}

// A server that never answers server/discover still connects (legacy)
// within a setup bound shorter than the probe's own 5 s: the probe takes
// at most half of it.
func TestProbeIgnoredWithinSetupBound(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Without the halving the probe would take all of it.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "ignores-discover", Command: exe, Dir: t.TempDir(), Logger: testLogger(t),
		Env: map[string]string{rawFakeEnv: "1", rawIgnoreDiscoverEnv: "1"}})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	if info := c.ServerInfo(); info.Era != mcpclient.EraLegacy {
		t.Errorf("ServerInfo = %+v, want legacy", info)
	}
}
