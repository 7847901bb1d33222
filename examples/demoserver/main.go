// Command demoserver runs the demo MCP server of package demo over stdio,
// streamable HTTP or legacy SSE.
//
// Usage:
//
//	demoserver [-transport stdio|http|sse] [-addr 127.0.0.1:8765] [-state-dir DIR]
//	           [-faults] [-poll-stats] [-poll-min-gap 500ms] [-conformance]
//	           [-era both|legacy|shim|modern] [-init-delay 10s] [-init-gate FILE]
//	           [-auth-issuer URL]
//
// -era limits the protocol eras served (stdio and http; see demo.EraOptions):
// both (the default, mcp-go's behaviour), legacy (server/discover refused),
// shim (server/discover lists only versions up to 2025-11-25) or modern
// (2026-07-28 only: server/discover lists it alone, initialize is refused).
// With -era modern the server also has research and research_stats, and
// serves the 2026-07-28 tasks extension for research (demo.Research).
//
// With -conformance it serves the fixture tools of the official MCP
// conformance suite's server scenarios (demo.NewConformance) instead of
// the demo tools.
//
// Over http the MCP endpoint is http://ADDR/mcp; over sse the stream is
// http://ADDR/sse and messages go to http://ADDR/message. With -state-dir the
// report tasks are kept as JSON files in DIR, so a restarted server still
// knows them. Over stdio nothing but the protocol is written to stdout; logs
// go to stderr.
//
// -init-delay and -init-gate play an upstream that is slow to start
// (stdio and http): each handshake (initialize, or server/discover) is
// answered only after the delay and, with -init-gate, once FILE exists
// (demo.InitWait).
//
// With -auth-issuer (http only) /mcp is an OAuth-protected MCP server
// (demo.BearerAuth): JWT access tokens of that issuer for the resource
// http://ADDR/mcp, 401 with resource_metadata otherwise, the metadata at
// http://ADDR/.well-known/oauth-protected-resource/mcp; whoami shows the
// token's subject as X-Demo-Oauth-Subject.
//
// For fault suites: -faults adds the fault tools of package demo (hang,
// crash, malformed, huge); over http a call of malformed is answered by the
// command itself with a truncated JSON body. -poll-stats (http only) serves
// the status-call counts of a demo.PollTracker as JSON at
// http://ADDR/debug/polls, with -poll-min-gap as its MinGap.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

func main() {
	log.SetOutput(os.Stderr)
	log.SetFlags(0)
	log.SetPrefix("demoserver: ")

	transport := flag.String("transport", "stdio", "transport: stdio, http (streamable HTTP at /mcp) or sse")
	addr := flag.String("addr", "127.0.0.1:8765", "listen address for http and sse")
	stateDir := flag.String("state-dir", "", "directory for persistent task state (optional)")
	faults := flag.Bool("faults", false, "add the fault tools hang, crash, malformed and huge")
	pollStats := flag.Bool("poll-stats", false, "serve status-call counts at /debug/polls (http only)")
	minGap := flag.Duration("poll-min-gap", 0, "with -poll-stats: status calls of one task closer than this count as duplicates")
	conformance := flag.Bool("conformance", false, "serve the fixture of the official MCP conformance suite's server scenarios instead of the demo tools")
	logging := flag.Bool("logging", false, "declare the logging capability and add log_levels (log messages at every level while it runs)")
	federation := flag.Bool("federation", false, "add resources, a resource template, an MCP Apps ui:// resource, the prompt greet with completions and the tools link and widget")
	bridge := flag.Bool("bridge", false, "add the era-bridging tools confirm (a multi-round-trip elicitation) and client_capabilities")
	era := flag.String("era", demo.EraBoth, "protocol eras served: both, legacy (no server/discover), shim (server/discover without 2026-07-28) or modern (2026-07-28 only, initialize refused)")
	var initWait demo.InitWait
	flag.DurationVar(&initWait.Delay, "init-delay", 0, "answer each initialize (or server/discover) only after this delay (stdio and http)")
	flag.StringVar(&initWait.Gate, "init-gate", "", "answer each initialize (or server/discover) only once this file exists (stdio and http)")
	authIssuer := flag.String("auth-issuer", "", "http only: require OAuth access tokens (JWTs) of this issuer for /mcp, answering 401 with resource_metadata (demo.BearerAuth)")
	authToolScopes := flag.String("auth-tool-scopes", "", "with -auth-issuer: tool=scope,... tools whose calls need that scope in the token, else 403 insufficient_scope (a step-up)")
	flag.Parse()

	eraOpts, versions, err := demo.EraOptions(*era)
	if err != nil {
		log.Fatal(err)
	}
	if *transport == "sse" && *era != demo.EraBoth {
		log.Fatal("-era applies to stdio and http only")
	}

	cancels := &demo.Cancellations{}
	cfg := demo.Config{StateDir: *stateDir, Faults: *faults, Bridge: *bridge, Logging: *logging, Federation: *federation, Cancellations: cancels, ServerOptions: eraOpts}
	if *era == demo.EraModern {
		// The 2026-07-28 tasks extension's research tool.
		cfg.Research = demo.NewResearch()
		cfg.ServerOptions = append(cfg.ServerOptions, demo.TasksExtensionOption())
	}
	if *transport == "stdio" {
		cfg.RawOut = os.Stdout
	}
	var extra *http.ServeMux
	var wrap func(http.Handler) http.Handler // around /mcp
	if *pollStats || *faults || *authIssuer != "" {
		extra = http.NewServeMux()
	}
	if *pollStats {
		cfg.Polls = &demo.PollTracker{MinGap: *minGap}
		extra.HandleFunc("/debug/polls", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(cfg.Polls.Stats())
		})
	}
	s, err := demo.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if *faults {
		wrap = malformedOverHTTP
	}
	research := cfg.Research
	if research != nil {
		inner := wrap
		wrap = func(h http.Handler) http.Handler {
			if inner != nil {
				h = inner(h)
			}
			return research.Wrap(h)
		}
	}
	if *conformance {
		s, wrap, research = demo.NewConformance(), demo.ConformanceHTTP, nil
	}
	if *authIssuer != "" {
		if *transport != "http" {
			log.Fatal("-auth-issuer applies to http only")
		}
		auth := &demo.BearerAuth{Issuer: *authIssuer, Resource: "http://" + *addr + "/mcp", Scopes: []string{"mcp:read", "mcp:write"}}
		for _, pair := range strings.Split(*authToolScopes, ",") {
			if tool, scope, ok := strings.Cut(strings.TrimSpace(pair), "="); ok {
				if auth.ToolScopes == nil {
					auth.ToolScopes = map[string]string{}
				}
				auth.ToolScopes[tool] = scope
			}
		}
		auth.Routes(extra)
		inner := wrap
		wrap = func(h http.Handler) http.Handler {
			if inner != nil {
				h = inner(h)
			}
			return auth.Wrap(h)
		}
	}
	if initWait != (demo.InitWait{}) {
		if *transport == "sse" {
			log.Fatal("-init-delay and -init-gate apply to stdio and http only")
		}
		inner := wrap
		wrap = func(h http.Handler) http.Handler {
			if inner != nil {
				h = inner(h)
			}
			return initWait.Wrap(h)
		}
	}
	if err := serve(s, cancels, *transport, *addr, extra, wrap, versions, research, initWait); err != nil {
		log.Fatal(err)
	}
}

// malformedOverHTTP answers a tools/call of the malformed fault tool with a
// truncated JSON body, and passes every other request to next.
func malformedOverHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == "malformed" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// serve runs s on transport; cancels counts the notifications/cancelled
// that reach it over stdio and http. wrap, when set, goes around the http
// transport's /mcp handler; research, when set, answers its tasks
// extension's lines over stdio. versions, when set, are what
// server/discover advertises. initWait holds back initialize requests over
// stdio (over http wrap holds them).
func serve(s *server.MCPServer, cancels *demo.Cancellations, transport, addr string, extra *http.ServeMux, wrap func(http.Handler) http.Handler, versions []string, research *demo.Research, initWait demo.InitWait) error {
	switch transport {
	case "stdio":
		// Stops on SIGINT/SIGTERM and on end of input.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		stdio := server.NewStdioServer(s)
		stdio.SetErrorLogger(log.Default())
		stdio.SetContextFunc(demo.EraStdioContext(versions))
		var in io.Reader = cancels.WatchReader(initWait.Reader(os.Stdin))
		var out io.Writer = os.Stdout
		if research != nil {
			in, out = research.WrapStdio(in, out)
		}
		err := stdio.Listen(ctx, in, out)
		if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case "http":
		if extra == nil {
			extra = http.NewServeMux()
		}
		h := server.NewStreamableHTTPServer(s, server.WithStateful(true),
			server.WithStreamableHTTPServer(&http.Server{Handler: extra, ReadHeaderTimeout: 10 * time.Second}),
			server.WithStreamableHTTPProtocolVersions(versions...))
		var mcpHandler http.Handler = h
		if wrap != nil {
			mcpHandler = wrap(h)
		}
		extra.Handle("/mcp", cancels.Watch(mcpHandler))
		return serveHTTP(addr, "http://"+addr+"/mcp", h.Start, h.Shutdown)
	case "sse":
		h := server.NewSSEServer(s, server.WithBaseURL("http://"+addr))
		return serveHTTP(addr, "http://"+addr+"/sse", h.Start, h.Shutdown)
	default:
		return fmt.Errorf("unknown transport %q (want stdio, http or sse)", transport)
	}
}

// serveHTTP runs start until SIGINT/SIGTERM, then shuts down gracefully.
func serveHTTP(addr, url string, start func(string) error, shutdown func(context.Context) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	errc := make(chan error, 1)
	go func() { errc <- start(addr) }()
	log.Printf("serving %s", url)

	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
