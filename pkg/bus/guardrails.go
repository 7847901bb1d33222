package bus

import (
	"encoding/json"
	"time"
)

// External guardrail providers.
//
// With guardrails.provider.use "nats:<subject>" in config.yaml, the toolcall
// service asks <subject> (request/reply, JSON) about every tool call before
// it resolves the tool or contacts anything upstream. The provider answers
// a GuardrailRequest with a GuardrailDecision. A reply with the
// Mcpbus-Error header, no responder or a timeout is a provider error:
// denied with code GuardrailCodeEvaluatorError when guardrails.fail_closed
// is true (the default), allowed otherwise. Request secrets are never sent.

// GuardrailRequest describes the tool call being checked.
type GuardrailRequest struct {
	// Tool is the visible tool name the agent called (e.g. openviking_forget).
	Tool string `json:"tool"`
	// Arguments are the call's arguments as the agent sent them.
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	UserID     string          `json:"user_id"`
	ThreadID   string          `json:"thread_id"`
	RunID      string          `json:"run_id,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Timestamp  time.Time       `json:"timestamp"`
	// Kind is what is checked: GuardrailKindPrompt (Tool is then the
	// visible prompt name), GuardrailKindResource (a read, a listing or a
	// subscription of the server's resources and templates) or
	// GuardrailKindCompletion; empty for a tool call.
	Kind string `json:"kind,omitempty"`
	// Server is the MCP server of a prompt, resource or completion check.
	Server string `json:"server,omitempty"`
	// URI is the raw URI of a read (never a request secret).
	URI string `json:"uri,omitempty"`
}

// Guardrail request kinds (GuardrailRequest.Kind).
const (
	GuardrailKindPrompt     = "prompt"
	GuardrailKindResource   = "resource"
	GuardrailKindCompletion = "completion"
)

// GuardrailServerEntry is the allowlist entry covering everything of a
// server ("server:<name>" in allowed_tools or denied_tools).
func GuardrailServerEntry(server string) string { return "server:" + server }

// GuardrailDecision is a provider's answer. A denial should carry at least
// one reason; one without reasons is reported as GuardrailCodeDenied,
// "blocked by guardrail policy".
type GuardrailDecision struct {
	Allow    bool              `json:"allow"`
	Reasons  []GuardrailReason `json:"reasons,omitempty"`
	PolicyID string            `json:"policy_id,omitempty"`
}

// GuardrailReason is one reason for a decision.
type GuardrailReason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Guardrail reason codes used by mcpbus itself.
const (
	// GuardrailCodeToolNotAllowed: the built-in allowlist denied the tool.
	GuardrailCodeToolNotAllowed = "oap.tool_not_allowed"
	// GuardrailCodeDenied: a denial without reasons.
	GuardrailCodeDenied = "oap.denied"
	// GuardrailCodeEvaluatorError: the provider failed and fail_closed is on.
	GuardrailCodeEvaluatorError = "oap.evaluator_error"
)
