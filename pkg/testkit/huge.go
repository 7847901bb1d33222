package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// hugeInitResult is the huge server's initialize result.
const hugeInitResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"huge","version":"1"}}`

// WriteHugeResult writes the JSON-RPC response of id whose one text block
// is size bytes long, in 1 MiB writes (nothing of it is held in memory),
// calling flush after each, and stops at the first failed write.
func WriteHugeResult(w io.Writer, id json.RawMessage, size int, flush func()) {
	if _, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for left := size; left > 0; left -= len(chunk) {
		if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
			return
		}
		flush()
	}
	_, _ = io.WriteString(w, `"}]}}`+"\n")
	flush()
}

// HugeMCPServer is a streamable HTTP MCP server (hand-written JSON-RPC,
// no session) whose every tools/call answer is size bytes long, streamed:
// one JSON body, or one SSE event when sse is set. tools/list lists one
// tool, "big". It stops when the test ends.
func HugeMCPServer(t testing.TB, size int, sse bool) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		flush := func() { _ = http.NewResponseController(w).Flush() }
		switch m.Method {
		case "tools/call":
		case "tools/list":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"big","inputSchema":{"type":"object"}}]}}`, m.ID)
			return
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, hugeInitResult)
			return
		}
		if !sse {
			w.Header().Set("Content-Type", "application/json")
			WriteHugeResult(w, m.ID, size, flush)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: ")
		WriteHugeResult(w, m.ID, size, flush)
		_, _ = io.WriteString(w, "\n\n")
	}))
	t.Cleanup(ts.Close)
	return ts
}
