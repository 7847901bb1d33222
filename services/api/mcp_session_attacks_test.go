package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// vmRSS is this process's resident set size in bytes, read from
// /proc/self/status after a collection that returns freed memory to the
// system.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestMCPSessionFloodStaysBounded floods /mcp as one user: 250
// initializes whose clientInfo is 900 KiB (each would be kept in the
// session bucket and in every replica's mirror of it), then 250 with a
// clientInfo under the cap. The large ones are refused naming clientInfo,
// the user keeps at most max_sessions_per_user sessions (the newest: the
// first are retired), the bucket stays small and the process's memory
// (the api runs in it) grows by far less than the flood's size.
func TestMCPSessionFloodStaysBounded(t *testing.T) {
	// Not parallel: it measures the process's memory.
	e := startWith(t, options{keys: testKeys(), tools: mcpTools(), maxBody: 1 << 20})
	first, _ := rawInit(t, e.base, aliceKey, "2025-06-18")
	base := vmRSS(t)

	// initWith initializes with clientInfo and returns the status, the
	// session id and the JSON-RPC error (nothing of the request is kept).
	initWith := func(clientInfo string) (int, string, map[string]any) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":%s}}`, clientInfo)
		req, err := http.NewRequest(http.MethodPost, e.base+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var reply struct {
			Error map[string]any `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&reply)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), reply.Error
	}
	large := `{"name":"flood","version":"1","pad":"` + strings.Repeat("x", 900<<10) + `"}`
	for i := range 250 {
		status, id, rpcErr := initWith(large)
		if id != "" || rpcErr["code"] != float64(-32602) || !strings.Contains(fmt.Sprint(rpcErr["message"]), "clientInfo") {
			t.Fatalf("initialize %d with a 900 KiB clientInfo: %d %v, want invalid params naming clientInfo", i, status, rpcErr)
		}
	}
	small := `{"name":"flood","version":"1","pad":"` + strings.Repeat("x", 900) + `"}`
	var last string
	for i := range 250 {
		status, id, rpcErr := initWith(small)
		if status != http.StatusOK || id == "" {
			t.Fatalf("initialize %d with a small clientInfo: %d %v", i, status, rpcErr)
		}
		last = id
	}

	ctx := context.Background()
	kv, err := e.bus.JS.KeyValue(ctx, e.bus.Names.MCPSessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeysFiltered(ctx, bus.Digest("alice")+".*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range keys.Keys() {
		n++
	}
	if n > 64 {
		t.Errorf("alice holds %d sessions, want at most 64 (api.mcp.max_sessions_per_user)", n)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes() > 4<<20 {
		t.Errorf("the session bucket holds %d bytes after the flood", st.Bytes())
	}
	sc := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	if sc.MaxMsgSize != bus.MaxMCPSessionBytes || sc.MaxBytes <= 0 {
		t.Errorf("the session bucket's limits: max value %d, max bytes %d", sc.MaxMsgSize, sc.MaxBytes)
	}
	if grown := vmRSS(t) - base; grown > 100<<20 {
		t.Errorf("the process grew by %d MiB during the flood", grown>>20)
	}
	if resp := post(t, e.base+"/mcp", aliceKey, last, listBody); resp.StatusCode != http.StatusOK {
		t.Errorf("the newest session: %d", resp.StatusCode)
	}
	if resp := post(t, e.base+"/mcp", aliceKey, first, listBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the oldest session after the flood: %d, want 404 (retired)", resp.StatusCode)
	}
}

// TestMCPSessionIDsTravelAsDigests follows a legacy /sse session over the
// bus (what NATS monitoring shows): the subject of its stream and the
// thread of its tool calls carry the session id's digest, never the id.
func TestMCPSessionIDsTravelAsDigests(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), tools: mcpTools()})
	observer := e.bus.Connect(t)
	seen := make(chan *nats.Msg, 64)
	for _, subject := range []string{e.bus.Names.Internal("mcp.stream.>"), e.bus.Names.ToolsCall()} {
		if _, err := observer.ChanSubscribe(subject, seen); err != nil {
			t.Fatal(err)
		}
	}
	if err := observer.Flush(); err != nil {
		t.Fatal(err)
	}
	stream := openStream(t, http.MethodGet, e.base+"/sse", aliceKey, "")
	events := sseEvents(stream.Body)
	ep := nextEvent(t, events)
	id := strings.TrimPrefix(ep[1], "messages?session_id=")
	postMsg := func(body string) int { return post(t, e.base+"/"+ep[1], aliceKey, "", body).StatusCode }
	if st := postMsg(fmt.Sprintf(initBody, "2024-11-05")); st != http.StatusAccepted {
		t.Fatalf("initialize: %d", st)
	}
	nextEvent(t, events)
	if st := postMsg(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo_echo","arguments":{}}}`); st != http.StatusAccepted {
		t.Fatalf("tools/call: %d", st)
	}
	nextEvent(t, events)
	var streamSubject, thread string
	for streamSubject == "" || thread == "" {
		select {
		case m := <-seen:
			if strings.Contains(m.Subject, id) || strings.Contains(string(m.Data), id) {
				t.Errorf("the session id on the bus: %s %s", m.Subject, m.Data)
			}
			if m.Subject == e.bus.Names.ToolsCall() {
				var req bus.Call
				_ = json.Unmarshal(m.Data, &req)
				thread = req.ThreadID
			} else {
				streamSubject = m.Subject
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no stream delivery and tool call seen on the bus (stream %q, thread %q)", streamSubject, thread)
		}
	}
	if want := e.bus.Names.InternalMCPStream(id); streamSubject != want || !strings.HasSuffix(want, bus.Digest(id)) {
		t.Errorf("stream subject %q, want %q (the id's digest)", streamSubject, want)
	}
	if thread != bus.Digest(id) {
		t.Errorf("the session's thread on the bus is %q, want the id's digest", thread)
	}
}
