package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// catalogBenchTools is the tools each fake server of BenchmarkCatalog
// lists.
const catalogBenchTools = 50

// cursorPageReps is how many times a round asks for one cursor page, so
// that its CPU shows at /proc's 10 ms resolution.
const cursorPageReps = 200

// catalogSide is one `mcpbus dev` serving a catalog of some size, and the
// clients that read it.
type catalogSide struct {
	tools  int
	devPID int
	nc     *nats.Conn
	api    string
	mcp    *leanStreamable
	// cursor is the second page's cursor of a /mcp walk.
	cursor string
	// CPU of the dev process plus this process (the client side), added
	// up over the rounds, each row's and the dev process's alone (dev);
	// pages counts /mcp pages walked.
	nats, rest, walk, cursorPage row
	pages, rounds                int
}

// row is one way of reading the catalog: CPU of both sides, and of the
// gateway (the dev process) alone.
type row struct{ total, dev time.Duration }

// BenchmarkCatalog reads the catalog of `mcpbus dev` at 100 tools (2 HTTP
// servers × 50 tools) and at 10,000 (200 × 50) four ways, in rounds:
// mcpbus.tools.list over NATS (bus.ListCatalog, in pages), GET
// /api/mcp/tools, a whole /mcp tools/list walk (the lean generator's
// streamable HTTP session, leanload_test.go; pages of 100), and one /mcp
// page asked by cursor (the pages after a walk's first). Each row's cost is CPU time from /proc: the dev
// process's plus this process's (the client's decoding), per operation.
// It reports each, the /mcp page cost averaged over a walk and by cursor
// at both sizes, and at 10,000 tools the walk and REST against NATS.
// Nothing is asserted about times.
func BenchmarkCatalog(b *testing.B) {
	small := startCatalogSide(b, 2)
	large := startCatalogSide(b, 200)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		for _, s := range []*catalogSide{small, large} {
			s.round(b, ctx)
		}
	}
	b.StopTimer()
	for _, s := range []*catalogSide{small, large} {
		per := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(max(n, 1)) }
		tag := strconv.Itoa(s.tools)
		for _, r := range []struct {
			name string
			row  row
			n    int
		}{
			{"nats", s.nats, s.rounds}, {"rest", s.rest, s.rounds}, {"mcp-walk", s.walk, s.rounds},
			{"mcp-page-avg", s.walk, s.pages}, {"mcp-page", s.cursorPage, s.rounds * cursorPageReps},
		} {
			b.ReportMetric(per(r.row.total, r.n), r.name+"-µs/"+tag)
			b.ReportMetric(per(r.row.dev, r.n), r.name+"-gw-µs/"+tag)
		}
	}
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }
	b.ReportMetric(ratio(large.walk.total, large.nats.total), "walk/nats-10k")
	b.ReportMetric(ratio(large.rest.total, large.nats.total), "rest/nats-10k")
	b.ReportMetric(ratio(large.walk.total, small.walk.total)*float64(small.pages)/float64(max(large.pages, 1)), "page-avg-10k/100")
	b.ReportMetric(ratio(large.cursorPage.total, small.cursorPage.total), "page-10k/100")
}

// startCatalogSide starts `mcpbus dev` with servers fake HTTP servers of
// catalogBenchTools tools each and waits until its catalog is whole.
func startCatalogSide(b *testing.B, servers int) *catalogSide {
	urls := toolsServers(b, servers, catalogBenchTools)
	mcpServers := map[string]any{}
	for i, u := range urls {
		mcpServers[fmt.Sprintf("s%03d", i)] = map[string]any{"type": "http", "url": u}
	}
	ext, _ := json.Marshal(map[string]any{"mcpServers": mcpServers})
	dir, apiAddr := b.TempDir(), freeAddr(b)
	settings := fmt.Sprintf("api:\n  listen: %s\nlog:\n  level: warn\n", apiAddr)
	for name, content := range map[string]string{"extensions_config.json": string(ext), "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	out := &testkit.SyncBuffer{}
	s := &catalogSide{tools: servers * catalogBenchTools, api: "http://" + apiAddr}
	s.devPID = benchProcess(b, "mcpbus dev", out, dir, []string{"MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL="}, mcpbusBin, "dev", "--nats-port", "-1")
	testkit.Eventually(b, 60*time.Second, "dev mode to say it is running", func() bool {
		return strings.Contains(out.String(), "mcpbus dev is running")
	})
	nc, err := bus.Connect(devNATSURL(b, dir), "bench", bus.Auth{TokenFile: filepath.Join(dir, ".mcpbus", "nats.token")}, observability.Discard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	s.nc = nc
	testkit.Eventually(b, 120*time.Second, "the whole catalog", func() bool {
		r, err := bus.ListCatalog(context.Background(), nc, bus.Names{}.ToolsList(), bus.ToolsListRequest{UserID: "default"})
		return err == nil && len(r.Tools) == s.tools
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := newLeanStreamable(ctx, s.api+"/mcp", "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.close)
	s.mcp = l
	return s
}

// round reads the catalog once each way, checking every answer.
func (s *catalogSide) round(b *testing.B, ctx context.Context) {
	s.nats.add(s.cpu(b, func() {
		r, err := bus.ListCatalog(ctx, s.nc, bus.Names{}.ToolsList(), bus.ToolsListRequest{UserID: "default"})
		if err != nil || len(r.Tools) != s.tools {
			b.Fatalf("tools.list: %d tools, %v", len(r.Tools), err)
		}
	}))
	s.rest.add(s.cpu(b, func() {
		resp, err := http.Get(s.api + "/api/mcp/tools")
		if err != nil {
			b.Fatal(err)
		}
		var r bus.ToolsListReply
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || len(r.Tools) != s.tools {
			b.Fatalf("GET /api/mcp/tools: %d tools, %v", len(r.Tools), err)
		}
	}))
	s.walk.add(s.cpu(b, func() {
		n, pages, cursor := 0, 0, ""
		for {
			page := s.listPage(b, ctx, cursor)
			n += len(page.Tools)
			if pages++; pages == 1 {
				s.cursor = page.NextCursor
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if n != s.tools {
			b.Fatalf("/mcp walk: %d tools, want %d", n, s.tools)
		}
		s.pages += pages
	}))
	s.cursorPage.add(s.cpu(b, func() {
		for range cursorPageReps {
			if page := s.listPage(b, ctx, s.cursor); len(page.Tools) == 0 {
				b.Fatal("/mcp page by cursor: no tools")
			}
		}
	}))
	s.rounds++
}

// listPage is one /mcp tools/list page (after cursor, if any), decoded
// as a client would.
func (s *catalogSide) listPage(b *testing.B, ctx context.Context, cursor string) (page struct {
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	NextCursor string `json:"nextCursor"`
}) {
	params := "{}"
	if cursor != "" {
		params = `{"cursor":` + strconv.Quote(cursor) + `}`
	}
	resp, err := s.mcp.poster.post(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":`+params+`}`))
	if err != nil || resp.status != http.StatusOK {
		b.Fatalf("/mcp tools/list: %d %v", resp.status, err)
	}
	var r struct {
		Result *json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(resp.body, &r); err != nil || r.Result == nil {
		b.Fatalf("/mcp tools/list: %s", resp.body)
	}
	if err := json.Unmarshal(*r.Result, &page); err != nil {
		b.Fatal(err)
	}
	return page
}

// cpu is the CPU time the dev process and this process spent in fn.
func (s *catalogSide) cpu(b *testing.B, fn func()) row {
	dev, self := procCPU(b, s.devPID), selfCPU(b)
	fn()
	dev = procCPU(b, s.devPID) - dev
	return row{total: dev + selfCPU(b) - self, dev: dev}
}

func (r *row) add(o row) { r.total += o.total; r.dev += o.dev }

// selfCPU is this process's CPU time (user and system) so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// toolsServers serves servers streamable HTTP MCP servers (hand-written
// JSON-RPC, no session) from one listener, at <url>/s/<i>, each listing
// tools tools with a one-property input schema, and returns their URLs.
func toolsServers(b testing.TB, servers, tools int) []string {
	lists := make([][]byte, servers)
	for i := range lists {
		var ts []string
		for j := range tools {
			ts = append(ts, fmt.Sprintf(`{"name":"tool_%d","description":"Tool %d of server %d: does one thing with its query.",`+
				`"inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"the query"}},"required":["q"]}}`, j, j, i))
		}
		lists[i] = []byte(`{"tools":[` + strings.Join(ts, ",") + `]}`)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/s/"))
		if r.Method != http.MethodPost || err != nil || i < 0 || i >= servers || json.NewDecoder(r.Body).Decode(&m) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"tools","version":"1"}}`)
		if m.Method == "tools/list" {
			result = lists[i]
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	b.Cleanup(srv.Close)
	urls := make([]string, servers)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/s/%d", srv.URL, i)
	}
	return urls
}
