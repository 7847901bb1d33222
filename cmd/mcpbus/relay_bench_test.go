package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The relay floor of BenchmarkMCPEndpoint: the least any gateway of
// mcpbus's shape (HTTP → NATS → a service holding an mcp-go stdio client)
// can cost. The test binary re-executed with benchRelayEnv set to the demo
// server's path runs it as a process of its own (so its CPU is counted
// apart from the load generator's): an embedded NATS server, a net/http
// server taking streamable-HTTP JSON-RPC POSTs at /mcp that forwards each
// tools/call's body as a NATS request, and a NATS responder that calls the
// demo server's echo with one mcp-go stdio client and replies with the
// result, which the HTTP server returns as the JSON-RPC result. No auth,
// catalog, validation or session state: initialize is answered with a
// fixed result and session id, everything else but tools/call with 202.

// benchRelayEnv names the demo server binary the relay process calls.
const benchRelayEnv = "MCPBUS_BENCH_RELAY_DEMO"

// benchRelayListening prefixes the line the relay prints once it serves.
const benchRelayListening = "bench relay listening on "

// benchRelaySubject is the subject the HTTP side requests and the
// responder serves (the relay's NATS server is its own).
const benchRelaySubject = "bench.relay.echo"

// runBenchRelay runs the relay until the process is killed; it returns
// only on a setup error.
func runBenchRelay(demo string) error {
	ctx := context.Background()
	store, err := os.MkdirTemp("", "mcpbus-bench-relay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(store)
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: store})
	if err != nil {
		return err
	}
	defer ns.Shutdown()

	// The service: one mcp-go stdio client, as the direct row's, on its
	// own NATS connection (as a separate service process would have).
	upstream := client.NewClient(transport.NewStdio(demo, nil), client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	defer upstream.Close()
	if err := upstream.Start(ctx); err != nil {
		return fmt.Errorf("start demo server: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = upstream.Initialize(ictx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.ProtocolVersion20251125,
		ClientInfo: mcp.Implementation{Name: "bench-relay", Version: "1"}}})
	cancel()
	if err != nil {
		return fmt.Errorf("initialize demo server: %w", err)
	}
	serviceNC, err := nats.Connect(ns.URL())
	if err != nil {
		return err
	}
	defer serviceNC.Close()
	if _, err := serviceNC.Subscribe(benchRelaySubject, func(m *nats.Msg) {
		go relayCall(upstream, m)
	}); err != nil {
		return err
	}
	if err := serviceNC.Flush(); err != nil {
		return err
	}

	// The HTTP side, on a connection of its own.
	apiNC, err := nats.Connect(ns.URL())
	if err != nil {
		return err
	}
	defer apiNC.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(benchRelayListening + ln.Addr().String())
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { relayHTTP(apiNC, w, r) }))
}

// relayError is the header of a responder reply that carries an error
// text instead of a result.
const relayError = "Relay-Error"

// relayCall answers one NATS request (a JSON-RPC tools/call body) by
// calling the upstream and replying with the result's JSON.
func relayCall(upstream *client.Client, m *nats.Msg) {
	fail := func(err error) {
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set(relayError, err.Error())
		_ = m.RespondMsg(reply)
	}
	var rpc struct {
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(m.Data, &rpc); err != nil {
		fail(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = rpc.Params.Name, rpc.Params.Arguments
	res, err := upstream.CallTool(ctx, req)
	if err != nil {
		fail(err)
		return
	}
	out, err := json.Marshal(res)
	if err != nil {
		fail(err)
		return
	}
	_ = m.Respond(out)
}

// relayHTTP serves one POST: initialize with a fixed result and session
// id, tools/call over NATS, anything else (notifications) with 202.
func relayHTTP(nc *nats.Conn, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var rpc struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(body, &rpc); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var result []byte
	switch rpc.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "relay")
		result = []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"bench-relay","version":"1"}}`)
	case "tools/call":
		ctx, cancel := context.WithTimeout(r.Context(), 60*time.Second)
		reply, err := nc.RequestWithContext(ctx, benchRelaySubject, body)
		cancel()
		if err == nil && reply.Header.Get(relayError) != "" {
			err = fmt.Errorf("%s", reply.Header.Get(relayError))
		}
		if err != nil {
			writeRelayReply(w, rpc.ID, "error", fmt.Appendf(nil, `{"code":-32603,"message":%q}`, err.Error()))
			return
		}
		result = reply.Data
	default:
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeRelayReply(w, rpc.ID, "result", result)
}

// writeRelayReply writes a JSON-RPC response whose member key ("result"
// or "error") holds value.
func writeRelayReply(w http.ResponseWriter, id json.RawMessage, key string, value []byte) {
	b := make([]byte, 0, len(value)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"`+key+`":`...)
	b = append(b, value...)
	b = append(b, '}')
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
