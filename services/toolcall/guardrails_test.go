package toolcall_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

func allowlist(cfg map[string]any) config.Guardrails {
	return config.Guardrails{Enabled: true, FailClosed: true, Provider: config.GuardrailProvider{Use: "deerflow.guardrails.builtin:AllowlistProvider", Config: cfg}}
}

func TestGuardrailsAllowlist(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"),
		guardrails: allowlist(map[string]any{"allowed_tools": []any{"fake_echo", "fake_fail"}, "denied_tools": []any{"fake_fail"}})})
	for _, tc := range []struct{ tool, reason string }{
		{"fake_fail", "tool 'fake_fail' is denied"},            // deny wins over allow
		{"fake_whoami", "tool 'fake_whoami' not in allowlist"}, // not allowed
		{"nope_tool", "tool 'nope_tool' not in allowlist"},     // checked before resolution
	} {
		_, err := e.call(t, bus.Call{Tool: tc.tool})
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != bus.CodeGuardrailDenied || !strings.Contains(be.Message, tc.reason) ||
			!strings.Contains(be.Message, "Guardrail denied: tool '"+tc.tool+"'") || !strings.Contains(be.Message, bus.GuardrailCodeToolNotAllowed) {
			t.Errorf("%s: err = %v", tc.tool, err)
		}
	}
	if n := e.catalogRequests.Load(); n != 0 {
		t.Errorf("denied calls were resolved (%d catalog requests)", n)
	}
	if rs := readRecords(t, rec); len(rs) != 0 {
		t.Fatalf("the upstream received %v", rs)
	}
	if r := e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"ok"}`)}); text(t, r) != "ok" {
		t.Errorf("allowed call = %+v", r)
	}
}

func TestGuardrailsEmptyAllowlistDeniesAll(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"),
		guardrails: allowlist(map[string]any{"allowed_tools": []any{}})})
	_, err := e.call(t, bus.Call{Tool: "fake_echo"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeGuardrailDenied {
		t.Fatalf("err = %v", err)
	}
	if rs := readRecords(t, rec); len(rs) != 0 {
		t.Fatalf("the upstream received %v", rs)
	}
}

func TestGuardrailsOverNATS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		failClosed bool
		responder  func(req bus.GuardrailRequest) (*bus.GuardrailDecision, bool) // nil decision: no responder reply
		wantCode   bus.Code
		wantMsg    string
	}{
		{"allow", true, func(bus.GuardrailRequest) (*bus.GuardrailDecision, bool) {
			return &bus.GuardrailDecision{Allow: true}, true
		}, "", ""},
		{"deny with reason", true, func(r bus.GuardrailRequest) (*bus.GuardrailDecision, bool) {
			return &bus.GuardrailDecision{Reasons: []bus.GuardrailReason{{Code: "acme.no_echo", Message: "echo is off for " + r.UserID}}}, true
		}, bus.CodeGuardrailDenied, "(acme.no_echo). Reason: echo is off for alice"},
		{"deny without reason", true, func(bus.GuardrailRequest) (*bus.GuardrailDecision, bool) {
			return &bus.GuardrailDecision{}, true
		}, bus.CodeGuardrailDenied, "(oap.denied). Reason: blocked by guardrail policy"},
		{"provider error, fail closed", true, func(bus.GuardrailRequest) (*bus.GuardrailDecision, bool) { return nil, false },
			bus.CodeGuardrailDenied, "(oap.evaluator_error). Reason: guardrail provider error (fail-closed)"},
		{"provider error, fail open", false, func(bus.GuardrailRequest) (*bus.GuardrailDecision, bool) { return nil, false }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entry, rec := stdioServer(t, "")
			g := config.Guardrails{Enabled: true, FailClosed: tc.failClosed, Provider: config.GuardrailProvider{Use: "nats:acme.guardrails"}}
			e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), guardrails: g})
			var seen atomic.Pointer[bus.GuardrailRequest]
			nc := e.bus.Connect(t)
			if _, err := nc.Subscribe("acme.guardrails", func(m *nats.Msg) {
				var req bus.GuardrailRequest
				_ = json.Unmarshal(m.Data, &req)
				seen.Store(&req)
				d, ok := tc.responder(req)
				if !ok {
					r := nats.NewMsg(m.Reply)
					r.Header.Set(bus.HeaderError, string(bus.CodeInternal))
					r.Data = []byte(`{"error":{"code":"internal","message":"policy engine down"}}`)
					_ = m.RespondMsg(r)
					return
				}
				body, _ := json.Marshal(d)
				_ = m.Respond(body)
			}); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			_, err := e.call(t, bus.Call{Tool: "fake_echo", UserID: "alice", ThreadID: "t1",
				Arguments: json.RawMessage(`{"message":"x"}`), Context: &bus.CallContext{Secrets: map[string]string{"k": "guard-sek"}}})
			if req := seen.Load(); req == nil || req.Tool != "fake_echo" || req.UserID != "alice" || req.ThreadID != "t1" || !strings.Contains(string(req.Arguments), `"x"`) {
				t.Errorf("provider saw %+v", req)
			}
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("err = %v, want allowed", err)
				}
				return
			}
			var be *bus.Error
			if !errors.As(err, &be) || be.Code != tc.wantCode || !strings.Contains(be.Message, tc.wantMsg) {
				t.Fatalf("err = %v, want %s with %q", err, tc.wantCode, tc.wantMsg)
			}
			if rs := readRecords(t, rec); len(rs) != 0 {
				t.Fatalf("the upstream received %v", rs)
			}
		})
	}
}
