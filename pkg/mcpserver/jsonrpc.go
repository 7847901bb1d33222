package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/orderedjson"
)

// JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeRequestCancelled answers a request the client cancelled (the
	// code LSP uses; MCP expects no response, which clients ignore).
	CodeRequestCancelled = -32800
)

// Message is one JSON-RPC 2.0 message: a request (ID and Method), a
// notification (Method, no ID) or a response (ID and Result or Error).
// ID, Params and Result stay raw so they travel unchanged.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`

	// decoded is Params as the checks and the methods read it, decoded
	// once by the first of them (paramsOf).
	decoded *callParams
	// decodeErr is why Params does not fit callParams (a method names it).
	decodeErr error
}

// paramsOf is m's params decoded once: every check of a request
// (CheckHeaders, Check, CheckParamHeaders, the era's choice) and its
// tools/call read this one value instead of unmarshalling Params again.
// err says params does not fit (a tools/call answers it as invalid
// params); the fields that did decode are set all the same, as each
// check's own decode used to leave them. A Message is handled by one
// goroutine at a time, as it is read.
func (m *Message) paramsOf() (*callParams, error) {
	if m.decoded == nil {
		m.decoded = new(callParams)
		m.decodeErr = json.Unmarshal(orEmpty(m.Params), m.decoded)
	}
	return m.decoded, m.decodeErr
}

// IsRequest reports a request (a method and an id).
func (m *Message) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 }

// IsNotification reports a notification (a method, no id).
func (m *Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }

// IsResponse reports a response to a request this side sent.
func (m *Message) IsResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrBatch is returned by Parse for a JSON array: batches were removed in
// 2025-06-18 and mcpbus does not accept them in any version.
var ErrBatch = errors.New("JSON-RPC batches are not supported: send one message per request")

// Parse decodes one message and checks its shape. The error is a JSON-RPC
// error to send back with a null id (or the message's id when it had one).
func Parse(data []byte) (*Message, *Error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		return nil, &Error{Code: CodeInvalidRequest, Message: ErrBatch.Error()}
	}
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, Errorf(CodeParseError, "the body is not a JSON-RPC message: %v", err)
	}
	// encoding/json keeps the last of repeated members, and matches names
	// case-insensitively; a proxy that reads the first would route
	// another message than mcpbus runs.
	if k := orderedjson.RepeatedMember(data); k != "" {
		return nil, Errorf(CodeParseError, "the body repeats the member %q: send each member once", k)
	}
	if k := orderedjson.RepeatedMember(m.Params); k != "" {
		return nil, Errorf(CodeParseError, "params repeats the member %q: send each member once", k)
	}
	if m.JSONRPC != "2.0" {
		return &m, Errorf(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if len(m.ID) > 0 && (m.ID[0] != '"' && (m.ID[0] < '0' || m.ID[0] > '9') && m.ID[0] != '-') {
		return &m, Errorf(CodeInvalidRequest, "id must be a string or a number")
	}
	if m.Method == "" && len(m.ID) == 0 {
		return &m, Errorf(CodeInvalidRequest, "a message needs a method (request or notification) or an id (response)")
	}
	return &m, nil
}

// nullID is the id of a response to a message whose id is unknown.
var nullID = json.RawMessage("null")

// Encode is m's JSON. A successful response (the hot path: every
// tools/call) is put together from its raw id and result, which are valid
// JSON already (Parse decoded the id; Reply encoded the result or
// assembled it from decoded parts), rather than encoded again, which would
// scan the result's bytes once more.
func (m *Message) Encode() []byte {
	if m.Method == "" && m.Error == nil && len(m.Params) == 0 && len(m.ID) > 0 && len(m.Result) > 0 {
		b := make([]byte, 0, len(m.ID)+len(m.Result)+len(`{"jsonrpc":"2.0","id":,"result":}`))
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = append(b, m.ID...)
		b = append(b, `,"result":`...)
		b = append(b, m.Result...)
		return append(b, '}')
	}
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(ErrorReply(m.ID, Errorf(CodeInternalError, "cannot encode the response")))
	}
	return b
}

// Reply builds the response to req with result (encoded unless raw; a
// tools/call result is assembled from its raw parts).
func Reply(id json.RawMessage, result any) *Message {
	switch r := result.(type) {
	case callResult:
		return &Message{JSONRPC: "2.0", ID: id, Result: r.appendJSON(nil)}
	case readResult:
		return &Message{JSONRPC: "2.0", ID: id, Result: r.appendJSON(nil)}
	}
	raw, ok := result.(json.RawMessage)
	if !ok {
		var err error
		raw, err = json.Marshal(result)
		if err != nil {
			return ErrorReply(id, Errorf(CodeInternalError, "cannot encode the result"))
		}
	}
	return &Message{JSONRPC: "2.0", ID: id, Result: raw}
}

// ErrorReply builds an error response; a missing id becomes null.
func ErrorReply(id json.RawMessage, e *Error) *Message {
	if len(id) == 0 {
		id = nullID
	}
	return &Message{JSONRPC: "2.0", ID: id, Error: e}
}

// Notification builds a notification.
func Notification(method string, params any) *Message {
	m := &Message{JSONRPC: "2.0", Method: method}
	if params != nil {
		m.Params, _ = json.Marshal(params)
	}
	return m
}
