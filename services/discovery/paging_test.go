package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// A catalog several times larger than max_payload (16,000 tools on a 1 MiB
// server) crosses the bus a page at a time, each page under half of
// max_payload, and reads back whole and in order through bus.ListCatalog on
// both catalog subjects. An unpaged request is refused with an error that
// names max_payload and paging, instead of timing out.
func TestCatalogLargerThanMaxPayloadIsPaged(t *testing.T) {
	t.Parallel()
	const maxPayload = 1 << 20
	const nServers, perServer = 16, 1000
	b := testkit.StartBusMaxPayload(t, maxPayload)
	var srvs []srvJSON
	for i := range nServers {
		srvs = append(srvs, srvJSON{fmt.Sprintf("s%02d", i), httpServer(newFake(t, tools(fmt.Sprintf("t%02d_", i), perServer)...).URL, "")})
	}
	b.PublishExtensions(t, cfgOf(srvs...))
	runService(t, b, noWarm)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// Unpaged: refused, naming the limit and the way out.
	_, err := bus.Request[bus.ToolsListReply](ctx, b.NC, b.Names.ToolsList(), bus.ToolsListRequest{})
	if e := bus.AsError(err); e == nil || e.Code != bus.CodeInvalidRequest || !strings.Contains(e.Message, "max_payload 1048576") || !strings.Contains(e.Message, "page_size") {
		t.Fatalf("unpaged tools.list of %d tools: %v, want invalid_request naming max_payload and page_size", nServers*perServer, err)
	}

	// Walked by hand: every page is under half of max_payload, the first
	// alone carries the catalog-wide text, all pages share one revision.
	var walked []string
	req := bus.ToolsListRequest{PageSize: bus.CatalogPageSize}
	revision, pages := "", 0
	for {
		raw, err := bus.RequestRaw(ctx, b.NC, b.Names.ToolsList(), req)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(raw) > maxPayload/2 {
			t.Fatalf("page %d is %d bytes, over half of max_payload", pages, len(raw))
		}
		var page bus.ToolsListReply
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		if pages == 0 {
			revision = page.Revision
		}
		if page.Revision != revision || revision == "" || len(page.Bind) != len(page.Tools) {
			t.Fatalf("page %d: revision %q (first %q), %d tools, %d bound", pages, page.Revision, revision, len(page.Tools), len(page.Bind))
		}
		walked = append(walked, names(page)...)
		pages++
		if page.NextCursor == "" {
			break
		}
		req.Cursor = page.NextCursor
	}
	if pages < 5 || len(walked) != nServers*perServer {
		t.Fatalf("walk: %d tools in %d pages", len(walked), pages)
	}

	for _, subject := range []string{b.Names.ToolsList(), b.Names.InternalCatalog()} {
		all, err := bus.ListCatalog(ctx, b.NC, subject, bus.ToolsListRequest{})
		if err != nil {
			t.Fatalf("ListCatalog %s: %v", subject, err)
		}
		got := names(all)
		if len(got) != len(walked) || got[0] != "s00_t00_0" || got[len(got)-1] != fmt.Sprintf("s%02d_t%02d_%d", nServers-1, nServers-1, perServer-1) {
			t.Fatalf("ListCatalog %s: %d tools, first %q, last %q", subject, len(got), got[0], got[len(got)-1])
		}
		for i := range got {
			if got[i] != walked[i] {
				t.Fatalf("ListCatalog %s: tool %d is %s, the walk had %s", subject, i, got[i], walked[i])
			}
		}
		if subject == b.Names.ToolsList() && len(all.Bind) != len(got) {
			t.Fatalf("ListCatalog: %d names to bind, want %d", len(all.Bind), len(got))
		}
	}

	// toolcall's lookup of one tool: that tool alone in a small reply,
	// whatever the catalog's size; an unknown name, no tool.
	for name, want := range map[string]int{"s07_t07_123": 1, "s07_t07_nope": 0} {
		raw, err := bus.RequestRaw(ctx, b.NC, b.Names.InternalCatalog(), bus.ToolsListRequest{Tool: name})
		if err != nil {
			t.Fatalf("lookup of %s: %v", name, err)
		}
		var one bus.ToolsListReply
		if err := json.Unmarshal(raw, &one); err != nil {
			t.Fatal(err)
		}
		if got := names(one); len(got) != want || want == 1 && got[0] != name || len(raw) > 4096 {
			t.Fatalf("lookup of %s: tools %v in %d bytes, want %d tool(s) in a small reply", name, got, len(raw), want)
		}
	}
}

// A cursor outlives its catalog only as a catalog_changed error (the walk
// starts again); a string that is not a cursor is an invalid request
// naming the cursor; pages bind exactly the tools the unpaged reply binds.
func TestCatalogCursors(t *testing.T) {
	t.Parallel()
	f := newFake(t, tools("x", 5)...)
	b := startWith(t, cfgOf(srvJSON{"srv", httpServer(f.URL, "")}), noWarm)
	whole := mustList(t, b)
	page, err := listReq(t, b, bus.ToolsListRequest{PageSize: 2})
	if err != nil || len(page.Tools) != 2 || page.NextCursor == "" || page.Revision != whole.Revision || page.Generation != whole.Generation {
		t.Fatalf("first page of 2: %+v, %v", page, err)
	}
	next, err := listReq(t, b, bus.ToolsListRequest{PageSize: 2, Cursor: page.NextCursor})
	if err != nil || strings.Join(names(next), ",") != "srv_x2,srv_x3" || strings.Join(next.Bind, ",") != "srv_x2,srv_x3" {
		t.Fatalf("second page: %v %v, %v", names(next), next.Bind, err)
	}

	_, err = listReq(t, b, bus.ToolsListRequest{PageSize: 2, Cursor: "bm90IGEgY3Vyc29y"})
	if e := bus.AsError(err); e == nil || e.Code != bus.CodeInvalidRequest || !strings.HasPrefix(e.Message, "cursor:") || bus.IsCatalogChanged(err) {
		t.Fatalf("foreign cursor: %v, want invalid_request naming the cursor", err)
	}

	gen := reset(t, b).Generation
	listUntil(t, b, "the catalog of the new generation", func(r bus.ToolsListReply) bool { return r.Generation == gen })
	_, err = listReq(t, b, bus.ToolsListRequest{PageSize: 2, Cursor: page.NextCursor})
	if !bus.IsCatalogChanged(err) {
		t.Fatalf("cursor of generation %d after a reset to %d: %v, want catalog_changed", page.Generation, gen, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all, err := bus.ListCatalog(ctx, b.NC, b.Names.ToolsList(), bus.ToolsListRequest{})
	if err != nil || len(all.Tools) != 5 || all.Generation != gen {
		t.Fatalf("ListCatalog after the reset: %d tools of generation %d, %v", len(all.Tools), all.Generation, err)
	}
}

// With tool_search on, a walk in pages of one binds exactly what the
// unpaged reply binds (promoted and auto-promoted tools), every page
// carries the promotion state, and the routing hints and deferred section
// ride the first page only.
func TestCatalogPagesBindAsTheWholeCatalog(t *testing.T) {
	t.Parallel()
	pg := newFake(t, fakeTool{Name: "query", Description: "Run SQL"}, fakeTool{Name: "schema", Description: "Describe tables"})
	b := startWith(t, cfgOf(
		srvJSON{"pg", httpServer(pg.URL, `"routing": {"mode": "prefer", "priority": 80, "keywords": ["orders"]}`)},
	), discovery.Config{NoWarmUp: true, ToolSearch: config.ToolSearch{Enabled: true}})
	req := bus.ToolsListRequest{LatestUserMessage: "list the orders", Promoted: []string{"pg_schema"}}
	whole, err := listReq(t, b, req)
	if err != nil || len(whole.Bind) != 2 || whole.RoutingHints == "" || whole.DeferredSection == "" {
		t.Fatalf("whole: bind %v, hints %q, deferred %q, %v", whole.Bind, whole.RoutingHints, whole.DeferredSection, err)
	}
	req.PageSize = 1
	var bind []string
	pages := 0
	for i := 0; ; i++ {
		pages++
		page, err := listReq(t, b, req)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		if strings.Join(page.Promoted, ",") != strings.Join(whole.Promoted, ",") {
			t.Errorf("page %d: promoted %v, the whole reply %v", i, page.Promoted, whole.Promoted)
		}
		if first := i == 0; (page.RoutingHints == whole.RoutingHints && page.DeferredSection == whole.DeferredSection) != first ||
			!first && (page.RoutingHints != "" || page.DeferredSection != "") {
			t.Errorf("page %d: hints %q, deferred %q", i, page.RoutingHints, page.DeferredSection)
		}
		bind = append(bind, page.Bind...)
		if req.Cursor = page.NextCursor; req.Cursor == "" {
			break
		}
	}
	if strings.Join(bind, ",") != strings.Join(whole.Bind, ",") || pages != len(whole.Tools) {
		t.Errorf("%d pages bind %v, the whole reply %v (%d tools)", pages, bind, whole.Bind, len(whole.Tools))
	}
}
