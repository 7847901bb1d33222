package guardrails_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/guardrails"
)

func check(t *testing.T, g *guardrails.Guard, tool string) error {
	t.Helper()
	return g.Check(context.Background(), bus.GuardrailRequest{Tool: tool})
}

func TestAllowlist(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     map[string]any
		tool    string
		allowed bool
		reason  string
	}{
		{"no lists allow", map[string]any{}, "a_x", true, ""},
		{"deny list", map[string]any{"denied_tools": []any{"a_x"}}, "a_x", false, "tool 'a_x' is denied"},
		{"allow list", map[string]any{"allowed_tools": []any{"a_y"}}, "a_x", false, "tool 'a_x' not in allowlist"},
		{"allowed", map[string]any{"allowed_tools": []any{"a_x"}}, "a_x", true, ""},
		{"deny wins", map[string]any{"allowed_tools": []any{"a_x"}, "denied_tools": []any{"a_x"}}, "a_x", false, "is denied"},
		{"empty allowlist denies all", map[string]any{"allowed_tools": []any{}}, "a_x", false, "not in allowlist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := guardrails.New(config.Guardrails{Enabled: true, FailClosed: true,
				Provider: config.GuardrailProvider{Use: guardrails.UseDeerFlowAllowlist, Config: tc.cfg}}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = check(t, g, tc.tool)
			if tc.allowed {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				return
			}
			var be *bus.Error
			if !errors.As(err, &be) || be.Code != bus.CodeGuardrailDenied || !strings.Contains(be.Message, tc.reason) ||
				!strings.Contains(be.Message, "tool '"+tc.tool+"'") || !strings.Contains(be.Message, bus.GuardrailCodeToolNotAllowed) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

type failing struct{}

func (failing) Evaluate(context.Context, bus.GuardrailRequest) (bus.GuardrailDecision, error) {
	return bus.GuardrailDecision{}, errors.New("provider down")
}

type silentDeny struct{}

func (silentDeny) Evaluate(context.Context, bus.GuardrailRequest) (bus.GuardrailDecision, error) {
	return bus.GuardrailDecision{}, nil
}

func TestFailClosedAndOpen(t *testing.T) {
	t.Parallel()
	err := check(t, guardrails.NewWithProvider(failing{}, true, nil), "x")
	var be *bus.Error
	if !errors.As(err, &be) || !strings.Contains(be.Message, bus.GuardrailCodeEvaluatorError) || !strings.Contains(be.Message, "fail-closed") {
		t.Fatalf("fail closed: %v", err)
	}
	if err := check(t, guardrails.NewWithProvider(failing{}, false, nil), "x"); err != nil {
		t.Fatalf("fail open: %v", err)
	}
	err = check(t, guardrails.NewWithProvider(silentDeny{}, true, nil), "x")
	if !errors.As(err, &be) || !strings.Contains(be.Message, bus.GuardrailCodeDenied) || !strings.Contains(be.Message, "blocked by guardrail policy") {
		t.Fatalf("deny without reasons: %v", err)
	}
}

func TestDisabledAllowsAndBadUseFails(t *testing.T) {
	t.Parallel()
	g, err := guardrails.New(config.Guardrails{Enabled: false, Provider: config.GuardrailProvider{Use: "allowlist", Config: map[string]any{"allowed_tools": []any{}}}}, nil, nil)
	if err != nil || check(t, g, "x") != nil {
		t.Fatalf("disabled guard: %v", err)
	}
	if _, err := guardrails.New(config.Guardrails{Enabled: true, Provider: config.GuardrailProvider{Use: "my.mod:Thing"}}, nil, nil); err == nil {
		t.Fatal("unknown provider accepted")
	}
}

// TestAllowlistServerEntries: "server:<name>" covers everything of a
// server, deny wins; resources are checked by the server entry only.
func TestAllowlistServerEntries(t *testing.T) {
	a, err := guardrails.NewAllowlist(map[string]any{"allowed_tools": []any{"docs_summarize", "server:wiki"}, "denied_tools": []any{"server:secret"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req   bus.GuardrailRequest
		allow bool
	}{
		{bus.GuardrailRequest{Kind: bus.GuardrailKindResource, Server: "wiki"}, true},
		{bus.GuardrailRequest{Kind: bus.GuardrailKindResource, Server: "docs"}, false},
		{bus.GuardrailRequest{Kind: bus.GuardrailKindResource, Server: "secret"}, false},
		{bus.GuardrailRequest{Kind: bus.GuardrailKindPrompt, Tool: "docs_summarize", Server: "docs"}, true},
		{bus.GuardrailRequest{Kind: bus.GuardrailKindPrompt, Tool: "wiki_x", Server: "wiki"}, true},
		{bus.GuardrailRequest{Kind: bus.GuardrailKindPrompt, Tool: "docs_other", Server: "docs"}, false},
		// A resource check never passes on a tool name.
		{bus.GuardrailRequest{Kind: bus.GuardrailKindResource, Tool: "docs_summarize", Server: "docs"}, false},
		{bus.GuardrailRequest{Tool: "docs_summarize"}, true},
	} {
		d, _ := a.Evaluate(context.Background(), c.req)
		if d.Allow != c.allow {
			t.Errorf("%+v: allow %v, want %v", c.req, d.Allow, c.allow)
		}
	}
}
