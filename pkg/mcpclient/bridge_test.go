package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// bridgeServer serves the demo server with its bridging tools limited to
// era over streamable HTTP, counting the server/discover requests it gets.
func bridgeServer(t *testing.T, era string, discovers *atomic.Int64) http.Handler {
	t.Helper()
	h, err := demo.NewHTTP(era, demo.Config{Bridge: true}, server.WithStateful(era != demo.EraModern))
	if err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"server/discover"`)) {
				discovers.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// A modern server's input_required answer is a result with InputRequired
// (and no content); the capabilities and a retry's answers of
// CallOptions.Input reach it in the call; a -32021 answer is a
// MissingCapabilityError. A legacy server's elicitation/create during a
// call is refused, and the call that fails because of it is an
// UnservedRequestError naming the method.
func TestCallInputAndInputRequired(t *testing.T) {
	t.Parallel()
	var discovers atomic.Int64
	modern := connect(t, mcpclient.Spec{Server: "modern", Transport: mcpclient.TransportHTTP,
		URL: newStreamableServer(t, bridgeServer(t, demo.EraModern, &discovers)).URL + "/mcp"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	caps := json.RawMessage(`{"elicitation":{"form":{}}}`)
	res, err := modern.CallTool(ctx, "client_capabilities", nil, &mcpclient.CallOptions{Input: mcpclient.CallInput{Capabilities: caps}})
	if err != nil || len(res.Content) == 0 || !strings.Contains(string(res.Content[0]), `{\"elicitation\":{\"form\":{}}}`) {
		t.Errorf("capabilities at the server: %v %s", err, res.Content)
	}
	res, err = modern.CallTool(ctx, "client_capabilities", nil, nil)
	if err != nil || !strings.Contains(string(res.Content[0]), `"{}"`) {
		t.Errorf("capabilities without CallOptions.Input: %v %s", err, res.Content)
	}

	res, err = modern.CallTool(ctx, "confirm", json.RawMessage(`{"message":"go"}`), &mcpclient.CallOptions{Input: mcpclient.CallInput{Capabilities: caps}})
	if err != nil || res.InputRequired == nil || len(res.Content) != 0 {
		t.Fatalf("confirm: %v %+v", err, res)
	}
	var reqs map[string]struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(res.InputRequired.InputRequests, &reqs) != nil || reqs["confirm"].Method != "elicitation/create" || res.InputRequired.RequestState != demo.ConfirmState {
		t.Fatalf("input required: %s %q", res.InputRequired.InputRequests, res.InputRequired.RequestState)
	}
	retry := mcpclient.CallInput{Capabilities: caps, InputResponses: json.RawMessage(`{"confirm":{"action":"accept","content":{"ok":true}}}`), RequestState: res.InputRequired.RequestState}
	res, err = modern.CallTool(ctx, "confirm", json.RawMessage(`{"message":"go"}`), &mcpclient.CallOptions{Input: retry})
	if err != nil || res.InputRequired != nil || text(t, res) != `confirmed: action=accept content={"ok":true} state=`+demo.ConfirmState {
		t.Errorf("confirm retry: %v %+v", err, res)
	}

	var unused atomic.Int64
	legacy := connect(t, mcpclient.Spec{Server: "legacy", Transport: mcpclient.TransportHTTP,
		URL: newStreamableServer(t, bridgeServer(t, demo.EraLegacy, &unused)).URL + "/mcp"})
	_, err = legacy.CallTool(ctx, "confirm", json.RawMessage(`{"message":"go"}`), nil)
	var u *mcpclient.UnservedRequestError
	if !errors.As(err, &u) || u.Method != "elicitation/create" || u.Capability() != "elicitation" {
		t.Fatalf("legacy confirm: %v", err)
	}
	if got := text(t, call(t, legacy, "echo", `{"message":"still fine"}`, nil)); got != "still fine" {
		t.Errorf("echo after the refused elicitation = %q", got)
	}

	// With CallOptions.ServerRequests the call answers the server's request.
	var asked string
	answering := &mcpclient.CallOptions{ServerRequests: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		asked = method + " " + string(params)
		return json.RawMessage(`{"action":"accept","content":{"ok":true}}`), nil
	}}
	res, err = legacy.CallTool(ctx, "confirm", json.RawMessage(`{"message":"go"}`), answering)
	if err != nil || text(t, res) != `confirmed: action=accept content={"ok":true} state=`+demo.ConfirmState || !strings.HasPrefix(asked, `elicitation/create {`) {
		t.Errorf("legacy confirm answered by the call: %v %+v (asked %q)", err, res, asked)
	}
	refusing := &mcpclient.CallOptions{ServerRequests: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return nil, mcpclient.NewRPCError(-32601, "not here")
	}}
	if _, err := legacy.CallTool(ctx, "confirm", json.RawMessage(`{"message":"go"}`), refusing); err == nil || errors.As(err, &u) {
		t.Errorf("legacy confirm refused by the call: %v, want the server's failure (not an unserved request)", err)
	}
}

// EraCache.Seed: a seeded legacy era skips the server/discover probe; a Connect
// that fails in a seeded era forgets it, and the same seed offered again
// is ignored, so the next Connect probes.
func TestSeedEra(t *testing.T) {
	t.Parallel()
	var discovers atomic.Int64
	sw := &swapHandler{h: bridgeServer(t, demo.EraLegacy, &discovers)}
	spec := mcpclient.Spec{Server: "seeded", Transport: mcpclient.TransportHTTP, URL: newStreamableServer(t, sw).URL, Eras: mcpclient.NewEraCache()}
	spec.Eras.Seed(spec, mcpclient.EraLegacy)
	if got := connect(t, spec).ServerInfo().Era; got != mcpclient.EraLegacy || discovers.Load() != 0 {
		t.Fatalf("seeded legacy: era %q after %d discover requests, want legacy after none", got, discovers.Load())
	}

	sw.set(bridgeServer(t, demo.EraModern, &discovers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c, err := mcpclient.Connect(ctx, spec); err == nil {
		c.Close()
		t.Fatal("Connect in the stale seeded era succeeded")
	}
	spec.Eras.Seed(spec, mcpclient.EraLegacy) // the same catalog entry again
	if got := connect(t, spec).ServerInfo().Era; got != mcpclient.EraModern {
		t.Errorf("era after the failed seeded Connect = %q, want a probe to find modern", got)
	}
}
