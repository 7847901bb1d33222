package mcpserver_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// callRecorder stands in for toolcall on mcpbus.tools.call (the bus
// contract): it records each request and answers with answer's reply or
// error.
type callRecorder struct {
	mu   sync.Mutex
	seen []bus.Call
}

func (r *callRecorder) requests() []bus.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bus.Call(nil), r.seen...)
}

func (r *callRecorder) serve(t *testing.T, b *testkit.Bus, answer func(req bus.Call, n int) (bus.ToolsCallReply, *bus.Error)) {
	t.Helper()
	peer := b.Connect(t)
	if _, err := peer.Subscribe(b.Names.ToolsCall(), func(m *nats.Msg) {
		var req bus.Call
		_ = json.Unmarshal(m.Data, &req)
		r.mu.Lock()
		r.seen = append(r.seen, req)
		n := 0
		for _, s := range r.seen {
			if s.Tool == req.Tool {
				n++
			}
		}
		r.mu.Unlock()
		reply, berr := answer(req, n)
		if berr != nil {
			body, _ := json.Marshal(bus.ErrorReply{Error: berr})
			_ = m.RespondMsg(&nats.Msg{Data: body, Header: nats.Header{bus.HeaderError: []string{string(berr.Code)}}})
			return
		}
		body, _ := json.Marshal(reply)
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
}

// newSealer is a sealer under a fresh key.
func newSealer(t *testing.T) *crypto.Sealer {
	t.Helper()
	key, err := crypto.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := crypto.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return sealer
}

const elicit = `{"q":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}}`

// Bridging over one stdio stream: a modern call carries its client
// capabilities; an upstream's input_required is relayed with its
// requestState sealed to the caller and tool, and a retry's state is
// opened (the upstream's own reaches toolcall) only for that tool and
// within the state's hour; a legacy session is asked the input requests
// as server-to-client requests on its stream (its answer goes upstream
// with the state) when it declared the capability, gets -32021 when it
// did not, and gets a legacy upstream's own requests through the call's
// ask inbox, and mcpbus's retries for load shedding; a
// client_capability_missing refusal is -32021 with the required
// capabilities.
func TestBridgingOverStdio(t *testing.T) {
	t.Parallel()
	sealer := newSealer(t)
	rec := &callRecorder{}
	var clock atomic.Int64 // seconds added to the real time
	var askNC *nats.Conn
	s := startStdioWith(t, func(b *testkit.Bus, deps *mcpserver.Deps) {
		askNC = b.Connect(t)
		deps.StateSealer = sealer
		deps.Now = func() time.Time { return time.Now().Add(time.Duration(clock.Load()) * time.Second) }
		rec.serve(t, b, func(req bus.Call, n int) (bus.ToolsCallReply, *bus.Error) {
			switch {
			case req.Tool == "relay":
				// A legacy upstream's elicitation/create during the call,
				// sent to the call's ask inbox as toolcall does.
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				ans, err := bus.Request[bus.AskReply](ctx, askNC, req.AskInbox, bus.AskRequest{Method: "elicitation/create", Params: json.RawMessage(`{"message":"sure?"}`)})
				if err != nil || ans.Error != nil {
					return bus.ToolsCallReply{}, bus.Errorf(bus.CodeUpstreamError, "ask: %v %+v", err, ans.Error)
				}
				return bus.ToolsCallReply{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":` + strconv.Quote(string(ans.Result)) + `}`)}}, nil
			case req.Tool == "needs":
				return bus.ToolsCallReply{}, bus.MissingCapability("srv", map[string]any{"sampling": map[string]any{}}, "MCP server 'srv' needs sampling")
			case req.Tool == "shed" && n < 3:
				return bus.ToolsCallReply{Server: "srv", InputRequired: &bus.InputRequired{RequestState: "busy"}}, nil
			case req.Input != nil:
				return bus.ToolsCallReply{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"answered"}`)}}, nil
			case req.Tool == "shed":
				return bus.ToolsCallReply{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"never"}`)}}, nil
			}
			return bus.ToolsCallReply{Server: "srv", InputRequired: &bus.InputRequired{InputRequests: json.RawMessage(elicit), RequestState: "upstream-state"}}, nil
		})
	})
	caps := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"experimental":{"x":{}}}}`
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a",`+caps+`}}`)
	l := s.next(t)
	m := regexp.MustCompile(`"requestState":"([^"]+)"`).FindStringSubmatch(l)
	if !strings.Contains(l, `"resultType":"input_required"`) || !strings.Contains(l, `"inputRequests":`+elicit) || m == nil ||
		!strings.HasPrefix(m[1], "mcpbus1.") || strings.Contains(l, "upstream-state") {
		t.Fatalf("relayed input_required: %s", l)
	}
	sealed := m[1]
	if got := rec.requests()[0].ClientCapabilities; got == nil || string(got.JSON()) != `{"elicitation":{"form":{}}}` {
		t.Errorf("capabilities on the bus: %+v", got)
	}
	retry := `"inputResponses":{"q":{"action":"accept","content":{}}},"requestState":"` + sealed + `",` + caps
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a",`+retry+`}}`)
	if l := s.next(t); !strings.Contains(l, `"text":"answered"`) {
		t.Errorf("retry: %s", l)
	}
	if in := rec.requests()[1].Input; in == nil || in.RequestState != "upstream-state" || string(in.InputResponses) != `{"q":{"action":"accept","content":{}}}` {
		t.Errorf("retry on the bus: %+v", in)
	}
	calls := len(rec.requests())
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"b",`+retry+`}}`)
	if l := s.next(t); !strings.Contains(l, `"code":-32602`) || !strings.Contains(l, "requestState was not issued") {
		t.Errorf("a state sealed for another tool: %s", l)
	}
	clock.Store(int64(2 * time.Hour / time.Second))
	s.send(t, `{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"a",`+retry+`}}`)
	if l := s.next(t); !strings.Contains(l, `"code":-32602`) || !strings.Contains(l, "expired") {
		t.Errorf("an expired state: %s", l)
	}
	clock.Store(0)
	if len(rec.requests()) != calls {
		t.Error("a refused state reached toolcall")
	}
	s.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"needs",`+caps+`}}`)
	if l := s.next(t); !strings.Contains(l, `"code":-32021`) || !strings.Contains(l, `"requiredCapabilities":{"sampling":{}}`) || !strings.Contains(l, "'srv'") {
		t.Errorf("client_capability_missing: %s", l)
	}

	// A legacy session that declared elicitation is asked on its stream,
	// and its answer goes upstream with the state.
	s.send(t, `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"x"}}}`)
	s.next(t)
	s.send(t, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"a"}}`)
	ask := s.next(t)
	m = regexp.MustCompile(`^\{"jsonrpc":"2.0","id":"(mcpbus-ask-[0-9a-f]{32})","method":"elicitation/create","params":\{"message":"ok\?"`).FindStringSubmatch(ask)
	if m == nil {
		t.Fatalf("the elicitation asked of the legacy client: %s", ask)
	}
	if got := rec.requests()[len(rec.requests())-1].ClientCapabilities; got == nil || string(got.JSON()) != `{"elicitation":{}}` {
		t.Errorf("legacy capabilities on the bus: %+v, want the session's", got)
	}
	s.send(t, `{"jsonrpc":"2.0","id":"`+m[1]+`","result":{"action":"accept","content":{"ok":true}}}`)
	if l := s.next(t); !strings.Contains(l, `"id":6`) || !strings.Contains(l, `"text":"answered"`) {
		t.Errorf("legacy call after the answer: %s", l)
	}
	if in := rec.requests()[len(rec.requests())-1].Input; in == nil || in.RequestState != "upstream-state" || string(in.InputResponses) != `{"q":{"action":"accept","content":{"ok":true}}}` {
		t.Errorf("the legacy client's answer on the bus: %+v", in)
	}
	// A legacy upstream's own request reaches the client through the
	// call's ask inbox.
	s.send(t, `{"jsonrpc":"2.0","id":61,"method":"tools/call","params":{"name":"relay"}}`)
	ask = s.next(t)
	m = regexp.MustCompile(`^\{"jsonrpc":"2.0","id":"(mcpbus-ask-[0-9a-f]{32})","method":"elicitation/create","params":\{"message":"sure\?"\}\}$`).FindStringSubmatch(ask)
	if m == nil {
		t.Fatalf("the upstream's elicitation asked of the legacy client: %s", ask)
	}
	s.send(t, `{"jsonrpc":"2.0","id":"`+m[1]+`","result":{"action":"decline"}}`)
	if l := s.next(t); !strings.Contains(l, `"id":61`) || !strings.Contains(l, `{\"action\":\"decline\"}`) {
		t.Errorf("relay after the answer: %s", l)
	}
	if ai := rec.requests()[len(rec.requests())-1].AskInbox; !strings.HasPrefix(ai, s.bus.Names.AskInboxPrefix()) {
		t.Errorf("ask inbox on the bus: %q", ai)
	}
	// One that did not declare it cannot be asked: -32021.
	s.send(t, `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x"}}}`)
	s.next(t)
	s.send(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"a"}}`)
	if l := s.next(t); !strings.Contains(l, `"code":-32021`) || !strings.Contains(l, "'srv'") {
		t.Errorf("legacy input_required without the capability: %s", l)
	}
	if last := rec.requests()[len(rec.requests())-1]; last.ClientCapabilities == nil || string(last.ClientCapabilities.JSON()) != `{}` || last.AskInbox != "" {
		t.Errorf("legacy call without capabilities on the bus: %+v, want none declared and no ask inbox", last)
	}
	s.send(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"shed"}}`)
	if l := s.next(t); !strings.Contains(l, `"text":"answered"`) {
		t.Errorf("load shedding retried for the legacy client: %s", l)
	}
	var sheds []bus.Call
	for _, r := range rec.requests() {
		if r.Tool == "shed" {
			sheds = append(sheds, r)
		}
	}
	if len(sheds) != 3 || sheds[0].Input != nil || sheds[1].Input.RequestState != "busy" || sheds[2].Input.RequestState != "busy" {
		t.Errorf("shed requests: %+v", sheds)
	}
}

// A sealed requestState replayed by its own user: with other arguments,
// from another thread, or a second time (on another api replica: another
// Server sharing the used-state bucket) is invalid params and never
// reaches toolcall; sent back once with the call's arguments in its
// thread it is the upstream's state.
func TestSealedRequestStateIsBoundAndSingleUse(t *testing.T) {
	t.Parallel()
	sealer := newSealer(t)
	rec := &callRecorder{}
	var deps mcpserver.Deps
	s := startStdioWith(t, func(b *testkit.Bus, d *mcpserver.Deps) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		used, err := bus.MCPStatesKV(ctx, b.JS, b.Names, 1, mcpserver.StateTTL)
		if err != nil {
			t.Fatal(err)
		}
		d.StateSealer, d.UsedStates = sealer, used
		deps = *d
		rec.serve(t, b, func(req bus.Call, n int) (bus.ToolsCallReply, *bus.Error) {
			if req.Input != nil {
				return bus.ToolsCallReply{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"answered"}`)}}, nil
			}
			return bus.ToolsCallReply{Server: "srv", InputRequired: &bus.InputRequired{InputRequests: json.RawMessage(elicit), RequestState: "upstream-state"}}, nil
		})
	})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"to":"me", "n":1},`+meta+`}}`)
	m := regexp.MustCompile(`"requestState":"([^"]+)"`).FindStringSubmatch(s.next(t))
	if m == nil {
		t.Fatal("no sealed requestState")
	}
	retry := func(s *stdioSession, id int, args string) string {
		s.send(t, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"a","arguments":`+args+
			`,"inputResponses":{"q":{"action":"accept","content":{}}},"requestState":"`+m[1]+`",`+meta+`}}`)
		return s.next(t)
	}
	calls := len(rec.requests())
	if l := retry(s, 2, `{"to":"someone else","n":1}`); !strings.Contains(l, `"code":-32602`) || !strings.Contains(l, "arguments") {
		t.Errorf("the state with other arguments: %s", l)
	}
	other := serveStdio(t, s.srv, s.bus, mcpserver.Exchange{UserID: "u1", ThreadHeader: "t2"})
	if l := retry(other, 3, `{"to":"me","n":1}`); !strings.Contains(l, `"code":-32602`) || !strings.Contains(l, "thread") {
		t.Errorf("the state from another thread: %s", l)
	}
	if len(rec.requests()) != calls {
		t.Fatal("a refused state reached toolcall")
	}
	if l := retry(s, 4, `{"n":1,"to":"me"}`); !strings.Contains(l, `"text":"answered"`) {
		t.Fatalf("the retry with the call's arguments (compacted alike): %s", l)
	}
	if in := rec.requests()[calls].Input; in == nil || in.RequestState != "upstream-state" {
		t.Errorf("the retry on the bus: %+v", in)
	}
	calls = len(rec.requests())
	if l := retry(s, 5, `{"to":"me","n":1}`); !strings.Contains(l, `"code":-32602`) || !strings.Contains(l, "already used") {
		t.Errorf("the state sent back a second time: %s", l)
	}
	replica, err := mcpserver.New(mcpserver.Config{PageSize: 2}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if l := retry(serveStdio(t, replica, s.bus, mcpserver.Exchange{UserID: "u1", ThreadHeader: "t1"}), 6, `{"to":"me","n":1}`); !strings.Contains(l, "already used") {
		t.Errorf("the state sent back a second time to another replica: %s", l)
	}
	if len(rec.requests()) != calls {
		t.Error("a used state reached toolcall again")
	}
}
