package toolcall

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
)

// prevStdioCallRequest is the previous release's hand-over body, copied
// from its services/toolcall/affinity.go (with its nativeOp and fedOp,
// whose exported fields are the same as this release's nativeOp and the
// previous fedOp).
type prevStdioCallRequest struct {
	Server             string                  `json:"server"`
	Owner              string                  `json:"owner,omitempty"`
	Tool               string                  `json:"tool"` // the raw tool name
	Arguments          json.RawMessage         `json:"arguments,omitempty"`
	Headers            map[string]string       `json:"headers,omitempty"` // sent as _meta.headers
	UserID             string                  `json:"user_id"`
	ThreadID           string                  `json:"thread_id"`
	CallID             string                  `json:"call_id,omitempty"`
	ProgressInbox      string                  `json:"progress_inbox,omitempty"`
	LogLevel           string                  `json:"log_level,omitempty"`
	UserBound          bool                    `json:"user_bound,omitempty"`
	Native             *prevNativeOp           `json:"native,omitempty"`
	Fed                *prevFedOp              `json:"fed,omitempty"`
	ClientCapabilities *bus.ClientCapabilities `json:"client_capabilities,omitempty"`
	Input              *bus.CallInput          `json:"input,omitempty"`
	AskInbox           string                  `json:"ask_inbox,omitempty"`
}

type prevNativeOp struct {
	Method string `json:"method"`
	TaskID string `json:"task_id,omitempty"`
	TTLMS  int64  `json:"ttl_ms,omitempty"`
}

type prevFedOp struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// prevBody is a hand-over as the previous release sent it: the JSON of
// prevValue, written by the previous release's struct.
const prevBody = `{"server":"files","owner":"alice","tool":"read_file","arguments":{"path":"/tmp/a"},"headers":{"X-Trace":"t1"},"user_id":"alice","thread_id":"th-1","call_id":"c-1","progress_inbox":"_INBOX_alice.p1","log_level":"info","user_bound":true,"native":{"method":"tools/call","ttl_ms":60000},"client_capabilities":{"elicitation":{}},"input":{"input_responses":{"r1":{"action":"accept"}},"request_state":"st"},"ask_inbox":"_INBOX_alice.ask1"}`

var prevValue = prevStdioCallRequest{
	Server: "files", Owner: "alice", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/tmp/a"}`),
	Headers: map[string]string{"X-Trace": "t1"}, UserID: "alice", ThreadID: "th-1",
	CallID: "c-1", ProgressInbox: "_INBOX_alice.p1", LogLevel: "info", UserBound: true,
	Native:             &prevNativeOp{Method: "tools/call", TTLMS: 60000},
	ClientCapabilities: &bus.ClientCapabilities{Elicitation: json.RawMessage(`{}`)},
	Input:              &bus.CallInput{InputResponses: json.RawMessage(`{"r1":{"action":"accept"}}`), RequestState: "st"},
	AskInbox:           "_INBOX_alice.ask1",
}

// wantCall is the call both bodies above carry.
var wantCall = bus.Call{
	Tool: "read_file", Arguments: json.RawMessage(`{"path":"/tmp/a"}`), UserID: "alice", ThreadID: "th-1",
	CallID: "c-1", ProgressInbox: "_INBOX_alice.p1", LogLevel: "info",
	ClientCapabilities: &bus.ClientCapabilities{Elicitation: json.RawMessage(`{}`)},
	Input:              &bus.CallInput{InputResponses: json.RawMessage(`{"r1":{"action":"accept"}}`), RequestState: "st"},
	AskInbox:           "_INBOX_alice.ask1",
}

func TestPreviousReleaseFixtureIsWhatItsStructWrites(t *testing.T) {
	got, err := json.Marshal(prevValue)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != prevBody {
		t.Fatalf("the previous struct writes\n%s\nnot the fixture\n%s", got, prevBody)
	}
}

// An owner of this release serves a hand-over an owner of the previous
// release sent: the same call, server, owner, raw tool, headers and rules.
func TestHandOverFromThePreviousReleaseIsTheSameCall(t *testing.T) {
	var req stdioCallRequest
	if err := json.Unmarshal([]byte(prevBody), &req); err != nil {
		t.Fatal(err)
	}
	req.upgrade()
	if !reflect.DeepEqual(req.Call, wantCall) {
		t.Errorf("call = %+v\nwant %+v", req.Call, wantCall)
	}
	if req.RawTool != "read_file" || req.Server != "files" || req.Owner != "alice" || !req.UserBound ||
		req.Headers["X-Trace"] != "t1" {
		t.Errorf("hand-over = raw_tool %q server %q owner %q user_bound %v headers %v",
			req.RawTool, req.Server, req.Owner, req.UserBound, req.Headers)
	}
	if req.Native == nil || req.Native.Method != "tools/call" || req.Native.TTLMS != 60000 {
		t.Errorf("native = %+v", req.Native)
	}
}

// A receiving replica of this release writes a hand-over an owner of the
// previous release reads as the same call, and neither shape carries the
// request's secrets, run metadata or config.
func TestHandOverToThePreviousReleaseIsTheSameCall(t *testing.T) {
	call := wantCall
	call.Tool = "files__read_file" // the visible name; the raw one is the request's
	call.Context = &bus.CallContext{Secrets: map[string]string{"token": "s3cret-value"}}
	call.Metadata = json.RawMessage(`{"note":"meta-value"}`)
	call.Config = &bus.CallConfig{Metadata: json.RawMessage(`{"k":"config-value"}`)}
	call.Arguments = json.RawMessage(`{"path":"/before-the-chain"}`)
	u := &upcall{call: call, userBound: true, native: &nativeOp{Method: "tools/call", TTLMS: 60000}}
	r := &interceptors.Request{
		Server: "files", Tool: "read_file", Arguments: []byte(`{"path":"/tmp/a"}`),
		Headers: map[string]string{"X-Trace": "t1"}, UserID: "alice", ThreadID: "th-1",
	}
	tgt := target{srv: &config.Server{Name: "files", Type: config.TransportStdio}, owner: "alice"}
	body, err := json.Marshal(handOverBody(u.forwarded(r), tgt, r, u))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cret-value", "meta-value", "config-value"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("the hand-over body carries %q: %s", secret, body)
		}
	}

	var prev prevStdioCallRequest
	if err := json.Unmarshal(body, &prev); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(prev, prevValue) {
		t.Errorf("the previous release reads\n%+v\nwant\n%+v\nfrom %s", prev, prevValue, body)
	}

	// This release reads its own body from call, not from the flat copy.
	var req stdioCallRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	req.upgrade()
	want := wantCall
	want.Tool = "files__read_file"
	if !reflect.DeepEqual(req.Call, want) || req.RawTool != "read_file" {
		t.Errorf("this release reads call %+v raw_tool %q\nwant %+v", req.Call, req.RawTool, want)
	}
}
