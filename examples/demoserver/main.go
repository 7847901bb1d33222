// Command demoserver runs the demo MCP server of package demo over stdio,
// streamable HTTP or legacy SSE.
//
// Usage:
//
//	demoserver [-transport stdio|http|sse] [-addr 127.0.0.1:8765] [-state-dir DIR] [-conformance]
//
// With -conformance it serves the fixture tools of the official MCP
// conformance suite's server scenarios (demo.NewConformance) instead.
//
// Over http the MCP endpoint is http://ADDR/mcp; over sse the stream is
// http://ADDR/sse and messages go to http://ADDR/message. With -state-dir the
// report tasks are kept as JSON files in DIR, so a restarted server still
// knows them. Over stdio nothing but the protocol is written to stdout; logs
// go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
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
	conformance := flag.Bool("conformance", false, "serve the fixture of the official MCP conformance suite's server scenarios instead of the demo tools")
	flag.Parse()

	cancels := &demo.Cancellations{}
	s, err := demo.New(demo.Config{StateDir: *stateDir, Cancellations: cancels})
	if err != nil {
		log.Fatal(err)
	}
	if *conformance {
		s = demo.NewConformance()
	}
	if err := serve(s, cancels, *transport, *addr); err != nil {
		log.Fatal(err)
	}
}

// serve runs s on transport; cancels counts the notifications/cancelled
// that reach it over stdio and http.
func serve(s *server.MCPServer, cancels *demo.Cancellations, transport, addr string) error {
	switch transport {
	case "stdio":
		// Stops on SIGINT/SIGTERM and on end of input.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		stdio := server.NewStdioServer(s)
		stdio.SetErrorLogger(log.Default())
		err := stdio.Listen(ctx, cancels.WatchReader(os.Stdin), os.Stdout)
		if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case "http":
		h := server.NewStreamableHTTPServer(s, server.WithStateful(true))
		mux := http.NewServeMux()
		mux.Handle("/mcp", cancels.Watch(h))
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		start := func(string) error { return srv.ListenAndServe() }
		shutdown := func(ctx context.Context) error { return errors.Join(h.Shutdown(ctx), srv.Shutdown(ctx)) }
		return serveHTTP(addr, "http://"+addr+"/mcp", start, shutdown)
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
