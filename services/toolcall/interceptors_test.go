package toolcall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// probe is a compiled-in interceptor that counts its builds per server and
// records the Authorization header it sees, then sets X-Probe.
type probe struct {
	mu     sync.Mutex
	builds map[string]int
	seen   []string
}

func (p *probe) registry() *interceptors.Registry {
	r := interceptors.Default()
	r.Register("probe", func(arg string, env interceptors.Env) (interceptors.Interceptor, error) {
		p.mu.Lock()
		if p.builds == nil {
			p.builds = map[string]int{}
		}
		p.builds[env.Server.Name]++
		p.mu.Unlock()
		return func(ctx context.Context, req *interceptors.Request, next interceptors.Handler) (*interceptors.Result, error) {
			auth, _ := headers.Get(req.Headers, "Authorization")
			p.mu.Lock()
			p.seen = append(p.seen, auth)
			p.mu.Unlock()
			headers.Set(req.Headers, "X-Probe", "probe-"+arg)
			headers.Set(req.Headers, "Authorization", "Bearer probe")
			return next(ctx, req)
		}, nil
	})
	return r
}

func TestInterceptorChainOrderAndLifecycle(t *testing.T) {
	t.Parallel()
	f1, f2 := newHTTPFake(t, false), newHTTPFake(t, false)
	blocks := oauthBlock + `, "user_auth": {"users": {"alice": "Bearer user"}}, "headers_from_context": {"headers": {"authorization": "tok"}, "on_missing": "passthrough"}`
	p := &probe{}
	e := startWith(t, options{
		cfg: cfgOf(map[string]string{"one": httpServerJSON(f1.URL, blocks), "two": httpServerJSON(f2.URL, "")},
			`"mcpInterceptors": ["probe:1", "my_package.mcp.auth:build_auth_interceptor", "set_header:X-Set=v1", "nats:"]`),
		catalog:  append(fakeTools("one"), fakeTools("two")...),
		registry: p.registry(),
	})
	e.tokens(t, "Bearer oauth")
	for range 3 {
		e.mustCall(t, bus.Call{Tool: "one_echo", UserID: "alice"})
	}
	e.mustCall(t, bus.Call{Tool: "one_echo", UserID: "alice", Context: &bus.CallContext{Secrets: map[string]string{"tok": "Bearer ctx"}}})
	e.mustCall(t, bus.Call{Tool: "two_echo"})
	e.mustCall(t, bus.Call{Tool: "two_echo"})

	p.mu.Lock()
	builds, seen := p.builds, append([]string(nil), p.seen...)
	p.mu.Unlock()
	if builds["one"] != 1 || builds["two"] != 1 {
		t.Errorf("builds = %v, want one per server", builds)
	}
	// The custom interceptor runs after OAuth and user_auth...
	if seen[0] != "Bearer user" {
		t.Errorf("the custom interceptor saw Authorization %q, want user_auth's", seen[0])
	}
	calls := f1.calls("tools/call")
	// ...and before headers_from_context, which wins when it has a value.
	if got := calls[0].Headers["Authorization"]; got != "Bearer probe" {
		t.Errorf("without a secret Authorization = %q, want the interceptor's", got)
	}
	if got := calls[3].Headers["Authorization"]; got != "Bearer ctx" {
		t.Errorf("with a secret Authorization = %q, want headers_from_context's", got)
	}
	if calls[0].Headers["X-Probe"] != "probe-1" || calls[0].Headers["X-Set"] != "v1" {
		t.Errorf("headers = %v", calls[0].Headers)
	}
	// The unresolvable entries were skipped with a warning; the rest work.
	for _, entry := range []string{"my_package.mcp.auth:build_auth_interceptor", `"interceptor":"nats:"`} {
		if !strings.Contains(e.logs.String(), entry) || !strings.Contains(e.logs.String(), "MCP interceptor skipped") {
			t.Errorf("no warning for %s", entry)
		}
	}
	if got := f2.calls("tools/call")[0].Headers["X-Set"]; got != "v1" {
		t.Errorf("server two X-Set = %q", got)
	}

	// Editing server two rebuilds only its chain.
	e.bus.PublishExtensions(t, cfgOf(map[string]string{"one": httpServerJSON(f1.URL, blocks), "two": httpServerJSON(f2.URL, `"headers": {"X-New": "n"}`)},
		`"mcpInterceptors": ["probe:1", "my_package.mcp.auth:build_auth_interceptor", "set_header:X-Set=v1", "nats:"]`))
	testkit.Eventually(t, 10*time.Second, "the edited config to apply", func() bool {
		e.mustCall(t, bus.Call{Tool: "two_echo"})
		calls := f2.calls("tools/call")
		return calls[len(calls)-1].Headers["X-New"] == "n"
	})
	e.mustCall(t, bus.Call{Tool: "one_echo", UserID: "alice"})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.builds["one"] != 1 || p.builds["two"] != 2 {
		t.Errorf("builds after editing two = %v, want one:1 two:2", p.builds)
	}
}

func TestSingleStringInterceptorAndRequestLogger(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(f.URL, `"headers": {"X-Api-Key": "static-sek-value"}`)}, `"mcpInterceptors": "request_logger"`), fakeTools("web"))
	e.mustCall(t, bus.Call{Tool: "web_echo", UserID: "alice", ThreadID: "t1", Arguments: json.RawMessage(`{"message":"x"}`)})
	logs := e.logs.String()
	if !strings.Contains(logs, `"msg":"mcp tool call"`) || !strings.Contains(logs, `"header_names":"X-Api-Key"`) || !strings.Contains(logs, `"thread_id":"t1"`) {
		t.Errorf("request logger line missing:\n%s", logs)
	}
	if strings.Contains(logs, "static-sek-value") {
		t.Error("a header value was logged")
	}
}

func natsInterceptor(t *testing.T, e *env, subject string, fn func(bus.InterceptRequest) (bus.InterceptReply, bool)) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	nc := e.bus.Connect(t)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		n.Add(1)
		var req bus.InterceptRequest
		_ = json.Unmarshal(m.Data, &req)
		reply, ok := fn(req)
		if !ok {
			return // no reply: the call times out
		}
		body, _ := json.Marshal(reply)
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &n
}

func TestNATSInterceptor(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(f.URL, `"headers": {"X-Static": "s"}`)}, `"mcpInterceptors": ["nats:acme.intercept"]`), fakeTools("web"))
	var got atomic.Pointer[bus.InterceptRequest]
	natsInterceptor(t, e, "acme.intercept", func(req bus.InterceptRequest) (bus.InterceptReply, bool) {
		got.Store(&req)
		var args struct{ Message string }
		_ = json.Unmarshal(req.Arguments, &args)
		switch args.Message {
		case "short":
			return bus.InterceptReply{Result: &bus.InterceptResult{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"from interceptor"}`)}}}, true
		case "deny":
			return bus.InterceptReply{Error: &bus.InterceptError{Message: "not today"}}, true
		}
		return bus.InterceptReply{Headers: map[string]string{"x-static": "changed", "X-Added": "a"}, Arguments: json.RawMessage(`{"message":"rewritten"}`)}, true
	})

	r := e.mustCall(t, bus.Call{Tool: "web_echo", UserID: "alice", ThreadID: "t1", Arguments: json.RawMessage(`{"message":"orig"}`),
		Context: &bus.CallContext{Secrets: map[string]string{"k": "ctx-sek-never-sent"}}})
	if text(t, r) != "rewritten" {
		t.Errorf("reply = %q, want the rewritten arguments' echo", text(t, r))
	}
	req := got.Load()
	if req == nil || req.Server != "web" || req.Tool != "echo" || req.VisibleName != "web_echo" || req.UserID != "alice" || req.ThreadID != "t1" || req.Headers["X-Static"] != "s" {
		t.Errorf("interceptor saw %+v", req)
	}
	h := f.calls("tools/call")[0].Headers
	if h["X-Static"] != "changed" || h["X-Added"] != "a" {
		t.Errorf("upstream headers = %v", h)
	}

	before := len(f.calls("tools/call"))
	r = e.mustCall(t, bus.Call{Tool: "web_echo", Arguments: json.RawMessage(`{"message":"short"}`)})
	if text(t, r) != "from interceptor" {
		t.Errorf("short-circuit reply = %+v", r)
	}
	_, err := e.call(t, bus.Call{Tool: "web_echo", Arguments: json.RawMessage(`{"message":"deny"}`)})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeForbidden || be.Message != "not today" {
		t.Errorf("deny: err = %v", err)
	}
	if n := len(f.calls("tools/call")); n != before {
		t.Errorf("short-circuited or failed calls reached the upstream (%d calls)", n-before)
	}
}

func TestNATSInterceptorDownFailsTheCall(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(f.URL, "")}, `"mcpInterceptors": ["nats:nobody.home"]`), fakeTools("web"))
	_, err := e.call(t, bus.Call{Tool: "web_echo"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUnavailable || !strings.Contains(be.Message, "nats:nobody.home") {
		t.Fatalf("err = %v, want unavailable naming the interceptor", err)
	}
	if rs := f.all(); len(rs) != 0 {
		t.Errorf("the upstream received %v", rs)
	}
}

func TestInterceptorHeadersReachStdioAsMeta(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, `"mcpInterceptors": ["set_header:X-Trace=abc", "nats:acme.stdio"]`), fakeTools("fake"))
	natsInterceptor(t, e, "acme.stdio", func(req bus.InterceptRequest) (bus.InterceptReply, bool) {
		if req.Transport != "stdio" || req.Headers["X-Trace"] != "abc" {
			return bus.InterceptReply{Error: &bus.InterceptError{Code: bus.CodeInvalidRequest, Message: fmt.Sprintf("unexpected %+v", req)}}, true
		}
		return bus.InterceptReply{Headers: map[string]string{"X-From-Nats": "n"}}, true
	})
	w := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"}))
	hs, _ := w.Meta["headers"].(map[string]any)
	if hs["X-Trace"] != "abc" || hs["X-From-Nats"] != "n" || len(hs) != 2 {
		t.Errorf("_meta = %v", w.Meta)
	}
	var metas []string
	for _, r := range readRecords(t, rec) {
		if r.Method == "tools/call" {
			metas = append(metas, string(r.Meta))
		}
	}
	if len(metas) != 1 || !strings.Contains(metas[0], `"headers":{"X-From-Nats":"n","X-Trace":"abc"}`) {
		t.Errorf("recorded _meta = %v", metas)
	}
}

func TestStdioWithoutInterceptorsSendsNoMeta(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"x"}`)})
	for _, r := range readRecords(t, rec) {
		if r.Method == "tools/call" && len(r.Meta) > 0 && string(r.Meta) != "null" && string(r.Meta) != "{}" {
			t.Errorf("tools/call carried _meta %s", r.Meta)
		}
	}
}
