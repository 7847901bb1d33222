// Command demoserver runs the demo MCP server of package demo over stdio,
// streamable HTTP or legacy SSE.
//
// Usage:
//
//	demoserver [-transport stdio|http|sse] [-addr 127.0.0.1:8765] [-state-dir DIR]
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
	flag.Parse()

	s, err := demo.New(demo.Config{StateDir: *stateDir})
	if err != nil {
		log.Fatal(err)
	}
	if err := serve(s, *transport, *addr); err != nil {
		log.Fatal(err)
	}
}

func serve(s *server.MCPServer, transport, addr string) error {
	switch transport {
	case "stdio":
		// ServeStdio stops on SIGINT/SIGTERM and on end of input.
		err := server.ServeStdio(s, server.WithErrorLogger(log.Default()))
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case "http":
		h := server.NewStreamableHTTPServer(s, server.WithStateful(true))
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
