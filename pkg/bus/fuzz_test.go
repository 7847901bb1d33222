package bus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// envelopes are a zero value of every type that crosses the bus.
var envelopes = []any{
	bus.ToolsSearchRequest{}, bus.ToolsSearchReply{}, bus.ServersRequest{}, bus.ServersReply{}, bus.CatalogEvent{},
	bus.ToolsListRequest{}, bus.ToolsListReply{}, bus.Call{}, bus.ToolsCallReply{},
	bus.CacheResetRequest{}, bus.CacheResetReply{}, bus.HealthReply{}, bus.TokenRequest{}, bus.TokenReply{},
	bus.ErrorReply{}, bus.GuardrailRequest{}, bus.GuardrailDecision{}, bus.InterceptRequest{}, bus.InterceptReply{},
	bus.PersonalServersRequest{}, bus.PersonalServersReply{}, bus.InternalCallRequest{}, bus.InternalCallReply{},
	bus.TaskListRequest{}, bus.TaskDetail{}, bus.TaskListReply{}, bus.TaskEvent{}, bus.TaskEventMessage{},
	bus.FedListRequest{}, bus.ResourcesListReply{}, bus.ResourceTemplatesListReply{}, bus.PromptsListReply{},
	bus.ResourcesReadRequest{}, bus.ResourcesReadReply{}, bus.PromptsGetRequest{}, bus.PromptsGetReply{},
	bus.CompletionRequest{}, bus.CompletionReply{},
}

// FuzzEnvelopes decodes arbitrary bytes as every bus envelope, the way a
// handler or a requester does: decoding never panics, a decoded envelope
// encodes, and decoding its encoding gives the same encoding again (what a
// service forwards is what it read). As a reply, with and without the
// Mcpbus-Error header, the bytes give either the envelope or an *Error with
// a code.
func FuzzEnvelopes(f *testing.F) {
	f.Add([]byte(`{"tool":"demo_echo","arguments":{"message":"hi"},"user_id":"u","thread_id":"t","timeout_ms":1000}`), "")
	f.Add([]byte(`{"error":{"code":"not_found","message":"no tool","details":{"permanent":true}}}`), "not_found")
	f.Add([]byte(`{"error":null}`), "internal")
	f.Add([]byte(`{"content":[{"type":"text","text":"x"}],"structured_content":{"a":1},"is_error":false,"task":{"task_id":"mcp-task-1"}}`), "")
	f.Add([]byte(`{"generation":3,"tools":[{"name":"a_b","input_schema":{"type":"object"}}],"failed_servers":[{"server":"a","error":"e"}]}`), "")
	f.Add([]byte(`{"expires_at":"2026-01-02T03:04:05Z","header":"Authorization","value":"Bearer x"}`), "")
	f.Add([]byte(`{"limit":-1,"task_id":"\u0000"}`), "")
	f.Add([]byte(`[]`), "")
	f.Add([]byte(`{"arguments":1e999}`), "")
	f.Fuzz(func(t *testing.T, data []byte, errCode string) {
		for _, zero := range envelopes {
			typ := reflect.TypeOf(zero)
			v := reflect.New(typ)
			if json.Unmarshal(data, v.Interface()) != nil {
				continue
			}
			first, err := json.Marshal(v.Interface())
			if err != nil {
				// A RawMessage field holding invalid JSON cannot be
				// encoded; json.Unmarshal only stores valid values.
				t.Fatalf("%s decoded from %q does not encode: %v", typ, data, err)
			}
			again := reflect.New(typ)
			if err := json.Unmarshal(first, again.Interface()); err != nil {
				t.Fatalf("%s: its own encoding %s does not decode: %v", typ, first, err)
			}
			second, err := json.Marshal(again.Interface())
			if err != nil || !bytes.Equal(first, second) {
				t.Fatalf("%s: encoding is not stable:\n%s\n%s (%v)", typ, first, second, err)
			}
		}
		msg := nats.NewMsg("reply")
		msg.Data = data
		if errCode != "" {
			msg.Header.Set(bus.HeaderError, errCode)
		}
		_, err := bus.DecodeReply[bus.ToolsCallReply](msg)
		var be *bus.Error
		if err != nil && (!errors.As(err, &be) || be.Code == "") {
			t.Fatalf("DecodeReply error %v is not a coded *bus.Error", err)
		}
		if errCode != "" && err == nil {
			t.Fatalf("a reply with %s=%q decoded as a success", bus.HeaderError, errCode)
		}
	})
}

// FuzzPersonalRuntimeName derives runtime names of arbitrary definitions:
// a name is derived only from valid JSON, and the same definition written
// with other whitespace gives the same name.
func FuzzPersonalRuntimeName(f *testing.F) {
	f.Add("u1", "github", []byte(`{"type":"http","url":"https://example.com/mcp","headers":{"B":"2","A":"1"}}`))
	f.Add("", "", []byte(`{"a":1.50,"b":[true,null,"<&>"]}`))
	f.Add("u", "n", []byte(`{"a":1} {"b":2}`))
	f.Add("u", "n", []byte(`"\ud800"`))
	f.Fuzz(func(t *testing.T, user, name string, def []byte) {
		got, err := bus.PersonalRuntimeName(user, name, def)
		if err != nil {
			return
		}
		if !json.Valid(def) {
			t.Fatalf("runtime name %s derived from invalid JSON %q", got, def)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, def, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		again, err := bus.PersonalRuntimeName(user, name, indented.Bytes())
		if err != nil || again != got {
			t.Fatalf("reformatted definition: %q (%v), want %q", again, err, got)
		}
	})
}
