// Package guardrails decides, before anything else happens, whether a tool
// call may run. A [Guard] wraps one [Provider]: the built-in [Allowlist]
// (config "allowlist" or DeerFlow's
// "deerflow.guardrails.builtin:AllowlistProvider") or an external provider
// reached over NATS ("nats:<subject>", contract in pkg/bus/guardrails.go).
// Decisions are made on the visible tool name.
package guardrails

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Provider evaluates one call. An error is a provider failure (not a
// denial); the Guard applies fail_closed to it.
type Provider interface {
	Evaluate(ctx context.Context, req bus.GuardrailRequest) (bus.GuardrailDecision, error)
}

// Names of the built-in allowlist provider.
const (
	UseAllowlist         = "allowlist"
	UseDeerFlowAllowlist = "deerflow.guardrails.builtin:AllowlistProvider"
	// NATSPrefix starts an external provider's "nats:<subject>".
	NATSPrefix = "nats:"
)

// DefaultNATSTimeout bounds one request to an external provider.
const DefaultNATSTimeout = 5 * time.Second

// Guard applies the guardrails settings. The zero value and a nil *Guard
// allow everything. Safe for concurrent use.
type Guard struct {
	enabled    bool
	failClosed bool
	provider   Provider
	log        *slog.Logger
}

// New builds the guard for cfg. nc is needed only for a nats: provider.
func New(cfg config.Guardrails, nc *nats.Conn, log *slog.Logger) (*Guard, error) {
	if log == nil {
		log = observability.Discard()
	}
	g := &Guard{enabled: cfg.Enabled, failClosed: cfg.FailClosed, log: log}
	if !cfg.Enabled {
		return g, nil
	}
	use := strings.TrimSpace(cfg.Provider.Use)
	switch {
	case use == UseAllowlist || use == UseDeerFlowAllowlist:
		a, err := NewAllowlist(cfg.Provider.Config)
		if err != nil {
			return nil, err
		}
		g.provider = a
	case strings.HasPrefix(use, NATSPrefix) && strings.TrimSpace(use[len(NATSPrefix):]) != "":
		if nc == nil {
			return nil, errors.New("guardrails: a nats: provider needs a NATS connection")
		}
		g.provider = &NATSProvider{NC: nc, Subject: strings.TrimSpace(use[len(NATSPrefix):]), Timeout: DefaultNATSTimeout}
	default:
		return nil, fmt.Errorf("guardrails.provider.use must be %q or \"nats:<subject>\" when guardrails.enabled is true, got %q", UseAllowlist, use)
	}
	return g, nil
}

// NewWithProvider builds an enabled guard around p (tests, embedding).
func NewWithProvider(p Provider, failClosed bool, log *slog.Logger) *Guard {
	if log == nil {
		log = observability.Discard()
	}
	return &Guard{enabled: true, failClosed: failClosed, provider: p, log: log}
}

// Enabled reports whether calls are checked.
func (g *Guard) Enabled() bool { return g != nil && g.enabled && g.provider != nil }

// Check returns nil when the call may run, else a guardrail_denied
// *bus.Error naming the tool, the reason code and message (also in
// Details). Denials and provider errors are logged (tool and code only).
func (g *Guard) Check(ctx context.Context, req bus.GuardrailRequest) error {
	if !g.Enabled() {
		return nil
	}
	if req.Timestamp.IsZero() {
		req.Timestamp = time.Now().UTC()
	}
	d, err := g.provider.Evaluate(ctx, req)
	if err != nil {
		if !g.failClosed {
			g.log.Warn("guardrail provider error; allowing the call (fail_closed is false)", observability.Tool(req.Tool), observability.Err(err))
			return nil
		}
		g.log.Warn("guardrail provider error; denying the call (fail_closed)", observability.Tool(req.Tool), observability.Err(err))
		return denial(req, bus.GuardrailCodeEvaluatorError, "guardrail provider error (fail-closed)", "")
	}
	if d.Allow {
		return nil
	}
	code, msg := bus.GuardrailCodeDenied, "blocked by guardrail policy"
	if len(d.Reasons) > 0 {
		code, msg = d.Reasons[0].Code, d.Reasons[0].Message
		if code == "" {
			code = bus.GuardrailCodeDenied
		}
	}
	g.log.Info("guardrail denied a tool call", observability.Tool(req.Tool), "kind", req.Kind, observability.Server(req.Server), "reason_code", code, "policy_id", d.PolicyID)
	return denial(req, code, msg, d.PolicyID)
}

func denial(req bus.GuardrailRequest, code, msg, policy string) *bus.Error {
	var e *bus.Error
	switch req.Kind {
	case "":
		e = bus.Errorf(bus.CodeGuardrailDenied, "Guardrail denied: tool '%s' was blocked (%s). Reason: %s. Choose an alternative approach.", req.Tool, code, msg)
		e.Details = map[string]any{"tool": req.Tool}
	case bus.GuardrailKindPrompt:
		e = bus.Errorf(bus.CodeGuardrailDenied, "Guardrail denied: prompt '%s' was blocked (%s). Reason: %s.", req.Tool, code, msg)
		e.Details = map[string]any{"prompt": req.Tool, "server": req.Server}
	default:
		e = bus.Errorf(bus.CodeGuardrailDenied, "Guardrail denied: the %ss of MCP server '%s' are blocked (%s). Reason: %s.", req.Kind, req.Server, code, msg)
		e.Details = map[string]any{"server": req.Server}
	}
	e.Details["reason_code"], e.Details["reason"] = code, msg
	if policy != "" {
		e.Details["policy_id"] = policy
	}
	return e
}

// Allowlist is the built-in provider: denied_tools always deny (deny wins);
// with allowed_tools set, only those are allowed, and an empty list denies
// everything; without allowed_tools everything not denied is allowed.
type Allowlist struct {
	allowed map[string]bool // nil: no allowlist
	denied  map[string]bool
}

// NewAllowlist reads allowed_tools and denied_tools from the provider
// config (lists of strings).
func NewAllowlist(cfg map[string]any) (*Allowlist, error) {
	a := &Allowlist{denied: map[string]bool{}}
	if v, ok := cfg["allowed_tools"]; ok && v != nil {
		list, err := stringList(v, "allowed_tools")
		if err != nil {
			return nil, err
		}
		a.allowed = map[string]bool{}
		for _, s := range list {
			a.allowed[s] = true
		}
	}
	if v, ok := cfg["denied_tools"]; ok && v != nil {
		list, err := stringList(v, "denied_tools")
		if err != nil {
			return nil, err
		}
		for _, s := range list {
			a.denied[s] = true
		}
	}
	return a, nil
}

func stringList(v any, field string) ([]string, error) {
	switch x := v.(type) {
	case []string:
		return x, nil
	case []any:
		out := make([]string, 0, len(x))
		for i, item := range x {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("guardrails.provider.config.%s[%d] must be a string, got %T", field, i, item)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("guardrails.provider.config.%s must be a list of tool names, got %T", field, v)
	}
}

// Evaluate implements Provider.
// A "server:<name>" entry covers everything of that server (deny wins);
// resources, templates, subscriptions and completions are checked by
// their server's entry only, prompts by name or server entry.
func (a *Allowlist) Evaluate(_ context.Context, req bus.GuardrailRequest) (bus.GuardrailDecision, error) {
	byName := req.Kind == "" || req.Kind == bus.GuardrailKindPrompt
	serverEntry := ""
	if req.Server != "" {
		serverEntry = bus.GuardrailServerEntry(req.Server)
	}
	what := "tool '" + req.Tool + "'"
	if !byName || req.Kind == bus.GuardrailKindPrompt {
		what = req.Kind + " of MCP server '" + req.Server + "'"
	}
	if (byName && a.denied[req.Tool]) || (serverEntry != "" && a.denied[serverEntry]) {
		return deny(fmt.Sprintf("%s is denied", what)), nil
	}
	if a.allowed != nil && !(byName && a.allowed[req.Tool]) && !(serverEntry != "" && a.allowed[serverEntry]) {
		return deny(fmt.Sprintf("%s not in allowlist", what)), nil
	}
	return bus.GuardrailDecision{Allow: true}, nil
}

func deny(msg string) bus.GuardrailDecision {
	return bus.GuardrailDecision{Reasons: []bus.GuardrailReason{{Code: bus.GuardrailCodeToolNotAllowed, Message: msg}}}
}

// NATSProvider asks an external provider on Subject (pkg/bus/guardrails.go).
type NATSProvider struct {
	NC      *nats.Conn
	Subject string
	// Timeout bounds one request (within the caller's deadline). Defaults
	// to DefaultNATSTimeout.
	Timeout time.Duration
}

// Evaluate implements Provider.
func (p *NATSProvider) Evaluate(ctx context.Context, req bus.GuardrailRequest) (bus.GuardrailDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, cmpDuration(p.Timeout, DefaultNATSTimeout))
	defer cancel()
	return bus.Request[bus.GuardrailDecision](ctx, p.NC, p.Subject, req)
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
