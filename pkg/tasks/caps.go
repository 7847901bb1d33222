package tasks

import (
	"bytes"
	"encoding/json"
	"time"
)

// BoundError keeps the first MaxErrorChars characters of a persisted error.
func BoundError(s string) string { return truncateRunes(s, MaxErrorChars) }

// BoundView keeps the first MaxViewErrorChars characters of an error shown
// by the task API.
func BoundView(s string) string { return truncateRunes(s, MaxViewErrorChars) }

// compact returns raw serialized compactly (no insignificant spaces,
// non-ASCII kept as is).
func compact(raw json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CheckPayload serializes an input_required or result_artifact payload
// (kind names it) and refuses one over MaxPayloadBytes or not valid JSON; an
// oversized payload is a protocol error, never cut into a different value.
func CheckPayload(kind string, raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	out, err := compact(raw)
	if err != nil {
		return nil, protocolErrorf("MCP task %s payload is not valid JSON: %v", kind, err)
	}
	if len(out) > MaxPayloadBytes {
		return nil, protocolErrorf("MCP task %s payload exceeds the %d-byte limit", kind, MaxPayloadBytes)
	}
	return out, nil
}

// StoredResult is a result as the row keeps it.
type StoredResult struct {
	Result    json.RawMessage // nil when absent or truncated
	Preview   string
	Truncated bool
}

// NormalizeResult serializes a result compactly. One larger than maxBytes
// (UTF-8) is not cut: Result is dropped, Preview keeps the first
// previewChars characters of the string (a JSON string result) or of the
// compact JSON, and Truncated is set. Invalid JSON is a protocol error.
func NormalizeResult(raw json.RawMessage, maxBytes, previewChars int) (StoredResult, error) {
	if raw == nil {
		return StoredResult{}, nil
	}
	out, err := compact(raw)
	if err != nil {
		return StoredResult{}, protocolErrorf("MCP task result is not valid JSON: %v", err)
	}
	if len(out) <= maxBytes {
		return StoredResult{Result: out}, nil
	}
	text := string(out)
	var s string
	if out[0] == '"' && json.Unmarshal(out, &s) == nil {
		text = s
	}
	return StoredResult{Preview: truncateRunes(text, previewChars), Truncated: true}, nil
}

// EncodeResult serializes a Go value as a result. NaN and infinities are not
// JSON: they are the protocol error "MCP task result is not valid JSON: …".
func EncodeResult(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, protocolErrorf("MCP task result is not valid JSON: %v", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Outcome is a status or cancel reply normalized for the row: the local
// status and the capped fields.
type Outcome struct {
	Status         string // local status
	Result         StoredResult
	ResultArtifact json.RawMessage
	Error          string
	InputRequired  json.RawMessage
	PollAfter      time.Duration
}

// Normalize applies the size caps to a validated reply. An oversized
// input_required or result_artifact, or an invalid result, is a protocol
// error.
func Normalize(r StatusReply, s Settings) (Outcome, error) {
	input, err := CheckPayload("input_required", r.InputRequired)
	if err != nil {
		return Outcome{}, err
	}
	artifact, err := CheckPayload("result_artifact", r.ResultArtifact)
	if err != nil {
		return Outcome{}, err
	}
	res, err := NormalizeResult(r.Result, s.MaxResultBytes, s.ResultPreviewMaxChars)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{
		Status: LocalStatus(r.Status), Result: res, ResultArtifact: artifact,
		Error: BoundError(r.Error), InputRequired: input, PollAfter: r.PollAfter,
	}, nil
}
