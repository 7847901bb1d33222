package tasks

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ProtocolError is a permanent failure of the task protocol: the task fails
// with Message.
type ProtocolError struct{ Message string }

func (e *ProtocolError) Error() string { return e.Message }

// UserMessage is Message, written for the caller (bus.UserMessager).
func (e *ProtocolError) UserMessage() string { return e.Message }

// ToolError is a task tool that answered isError: true. It is retryable: it
// says the call failed, not that the remote task did.
type ToolError struct{ Message string }

func (e *ToolError) Error() string { return e.Message }

// UserMessage is Message, the task tool's own error text (bus.UserMessager).
func (e *ToolError) UserMessage() string { return e.Message }

// NameError is a server or task name that cannot be stored (empty, or
// longer than its column): the deployment's configuration is at fault.
type NameError struct{ Message string }

func (e *NameError) Error() string { return e.Message }

// UserMessage is Message, which names the field and the bound
// (bus.UserMessager).
func (e *NameError) UserMessage() string { return e.Message }

func protocolErrorf(format string, args ...any) *ProtocolError {
	return &ProtocolError{Message: fmt.Sprintf(format, args...)}
}

// invalid is the "Invalid structuredContent from MCP task tool" error.
func invalid(tool, detail string) *ProtocolError {
	return protocolErrorf("Invalid structuredContent from MCP task tool '%s': %s", tool, detail)
}

// ToolErrorFromContent builds the error of an isError result: the first
// non-empty text content block, stripped and cut to MaxToolErrorSnippet
// characters, follows the tool name.
func ToolErrorFromContent(tool string, content []json.RawMessage) *ToolError {
	msg := fmt.Sprintf("MCP task tool '%s' returned an error", tool)
	for _, raw := range content {
		var block struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &block) != nil || block.Type != "text" {
			continue
		}
		if text := strings.TrimSpace(block.Text); text != "" {
			return &ToolError{Message: msg + ": " + truncateRunes(text, MaxToolErrorSnippet)}
		}
	}
	return &ToolError{Message: msg}
}

// truncateRunes keeps the first n characters of s.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
