package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// stdioSession runs ServeStdio on pipes against a bus whose
// mcpbus.tools.list answers with three tools.
type stdioSession struct {
	in    io.WriteCloser
	lines chan string
	done  chan error
	bus   *testkit.Bus
	srv   *mcpserver.Server
}

func startStdio(t *testing.T) *stdioSession {
	t.Helper()
	return startStdioWith(t, nil)
}

// startStdioWith is startStdio with deps adjusted by with (nil: none).
func startStdioWith(t *testing.T, with func(b *testkit.Bus, deps *mcpserver.Deps)) *stdioSession {
	t.Helper()
	return startStdioCatalog(t, func(req bus.ToolsListRequest) bus.ToolsListReply {
		return bus.ToolsListReply{Tools: []bus.Tool{{Name: "a"}, {Name: "b"}, {Name: "c"}}, Bind: []string{"a", "b", "c"},
			RoutingHints: "hints for " + req.UserID + " in " + req.ThreadID}
	}, with)
}

// startStdioCatalog is startStdioWith answering mcpbus.tools.list with
// catalog.
func startStdioCatalog(t *testing.T, catalog func(bus.ToolsListRequest) bus.ToolsListReply, with func(b *testkit.Bus, deps *mcpserver.Deps)) *stdioSession {
	t.Helper()
	b := testkit.StartBus(t)
	peer := b.Connect(t)
	if _, err := peer.Subscribe(b.Names.ToolsList(), func(m *nats.Msg) {
		var req bus.ToolsListRequest
		_ = json.Unmarshal(m.Data, &req)
		body, _ := json.Marshal(catalog(req))
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	deps := mcpserver.Deps{NC: b.Connect(t), Names: b.Names}
	if with != nil {
		with(b, &deps)
	}
	srv, err := mcpserver.New(mcpserver.Config{PageSize: 2}, deps)
	if err != nil {
		t.Fatal(err)
	}
	return serveStdio(t, srv, b, mcpserver.Exchange{UserID: "u1", ThreadHeader: "t1"})
}

// serveStdio runs another stdio stream of srv for x (its user and thread).
func serveStdio(t *testing.T, srv *mcpserver.Server, b *testkit.Bus, x mcpserver.Exchange) *stdioSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdioSession{in: inW, lines: make(chan string, 16), done: make(chan error, 1), bus: b, srv: srv}
	go func() {
		s.done <- srv.ServeStdio(context.Background(), inR, outW, x)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() { inW.Close(); <-s.done })
	return s
}

func (s *stdioSession) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (s *stdioSession) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatal("output ended")
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("no output within 20s")
	}
	return ""
}

// TestServeStdio: requests before initialize are refused, initialize
// carries the caller's hints, pages follow cursors, a forged cursor is
// invalid params, malformed lines are JSON-RPC errors, batches are
// refused, unknown methods are method not found, and a catalog event is
// a list_changed notification.
func TestServeStdio(t *testing.T) {
	t.Parallel()
	s := startStdio(t)
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if l := s.next(t); !strings.Contains(l, `"code":-32600`) || !strings.Contains(l, "initialize first") {
		t.Errorf("tools/list before initialize: %s", l)
	}
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x"}}}`)
	if l := s.next(t); !strings.Contains(l, `"protocolVersion":"2025-06-18"`) || !strings.Contains(l, `"instructions":"hints for u1 in t1"`) {
		t.Errorf("initialize: %s", l)
	}
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	var page struct {
		Result struct {
			Tools      []struct{ Name string } `json:"tools"`
			NextCursor string                  `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(s.next(t)), &page); err != nil || len(page.Result.Tools) != 2 || page.Result.NextCursor == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	s.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":"`+page.Result.NextCursor+`"}}`)
	if l := s.next(t); !strings.Contains(l, `"name":"c"`) || strings.Contains(l, "nextCursor") {
		t.Errorf("second page: %s", l)
	}
	for line, want := range map[string]string{
		`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"bm9wZQ"}}`: `"code":-32602`,
		`{"jsonrpc":"2.0","id":6,`:                      `"code":-32700`,
		`[{"jsonrpc":"2.0","id":7,"method":"ping"}]`:    `"code":-32600`,
		`{"jsonrpc":"2.0","id":8,"method":"nope/list"}`: `"code":-32601`,
		`{"jsonrpc":"2.0","id":9,"method":"ping"}`:      `"result":{}`,
	} {
		s.send(t, line)
		if l := s.next(t); !strings.Contains(l, want) {
			t.Errorf("%s: got %s, want %s", line, l, want)
		}
	}
	if err := s.bus.NC.Publish(s.bus.Names.EventsCatalog(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if l := s.next(t); l != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
		t.Errorf("after a catalog event: %s", l)
	}
}

// TestStdioListenFollowsNamedTasks: a 2026-07-28 subscriptions/listen
// naming taskIds (the tasks extension declared) is acknowledged with them
// and gets notifications/tasks when the thread's task event names one of
// them, read from the task API as its owner; without the extension the
// listen is -32021.
func TestStdioListenFollowsNamedTasks(t *testing.T) {
	t.Parallel()
	s := startStdio(t)
	peer := s.bus.Connect(t)
	if _, err := peer.Subscribe(s.bus.Names.TasksGet(), func(m *nats.Msg) {
		var req bus.TaskListRequest
		_ = json.Unmarshal(m.Data, &req)
		if req.UserID != "u1" || req.ThreadID != "t1" || req.TaskID != "mcp-task-7" {
			body, _ := json.Marshal(bus.ErrorReply{Error: bus.Errorf(bus.CodeNotFound, "no such task")})
			_ = m.Respond(body)
			return
		}
		body, _ := json.Marshal(bus.TaskDetail{TaskItem: bus.TaskItem{TaskID: "mcp-task-7", Status: "completed", CreatedAt: time.Now(), UpdatedAt: time.Now()},
			Result: json.RawMessage(`{"report":"r"}`)})
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{%s}}`
	s.send(t, `{"jsonrpc":"2.0","id":"l0","method":"subscriptions/listen","params":{"notifications":{"taskIds":["mcp-task-7"]},`+
		strings.Replace(meta, "%s", "", 1)+`}}`)
	if l := s.next(t); !strings.Contains(l, `"code":-32021`) {
		t.Errorf("listen for tasks without the extension: %s", l)
	}
	s.send(t, `{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{"notifications":{"taskIds":["mcp-task-7"]},`+
		strings.Replace(meta, "%s", `"extensions":{"io.modelcontextprotocol/tasks":{}}`, 1)+`}}`)
	if l := s.next(t); !strings.Contains(l, "notifications/subscriptions/acknowledged") || !strings.Contains(l, `"taskIds":["mcp-task-7"]`) {
		t.Fatalf("listen ack: %s", l)
	}
	ev, _ := json.Marshal(bus.TaskEventMessage{TaskEvent: bus.TaskEvent{TaskID: "mcp-task-7"}, UserID: "u1", ThreadID: "t1"})
	if err := peer.Publish(s.bus.Names.TaskEvents("t1"), ev); err != nil {
		t.Fatal(err)
	}
	l := s.next(t)
	if !strings.Contains(l, `"method":"notifications/tasks"`) || !strings.Contains(l, `"taskId":"mcp-task-7"`) || !strings.Contains(l, `"status":"completed"`) ||
		!strings.Contains(l, `"report":"r"`) || !strings.Contains(l, `"io.modelcontextprotocol/subscriptionId":"l1"`) {
		t.Errorf("notifications/tasks: %s", l)
	}
}
