package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A tools/list walk reads the caller's catalog once, whatever its number
// of pages: the pages after the first are slices of the list the first
// built, for as long as the catalog's revision is the one the cursor
// names. A new walk reads the catalog again and shows what changed; a
// catalog without a revision (an older discovery) is read for every page.
func TestToolsListWalkReadsTheCatalogOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	reads, revision, n := 0, "r1", 7
	s := startStdioCatalog(t, func(bus.ToolsListRequest) bus.ToolsListReply {
		mu.Lock()
		defer mu.Unlock()
		reads++
		r := bus.ToolsListReply{Revision: revision, Bind: []string{}}
		for i := range n {
			name := fmt.Sprintf("%s_t%d", revision, i)
			r.Tools = append(r.Tools, bus.Tool{Name: name})
			r.Bind = append(r.Bind, name)
		}
		return r
	}, nil)
	set := func(rev string, tools int) {
		mu.Lock()
		defer mu.Unlock()
		revision, n, reads = rev, tools, 0
	}
	readsSoFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		return reads
	}
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x"}}}`)
	s.next(t)
	id := 10
	walk := func() (names []string, pages int) {
		cursor := ""
		for {
			params := "{}"
			if cursor != "" {
				params = fmt.Sprintf(`{"cursor":%q}`, cursor)
			}
			id++
			s.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":%s}`, id, params))
			var page struct {
				Result struct {
					Tools      []struct{ Name string } `json:"tools"`
					NextCursor string                  `json:"nextCursor"`
				} `json:"result"`
			}
			if l := s.next(t); json.Unmarshal([]byte(l), &page) != nil || len(page.Result.Tools) == 0 {
				t.Fatalf("page %d: %s", pages, l)
			}
			for _, tl := range page.Result.Tools {
				names = append(names, tl.Name)
			}
			pages++
			if cursor = page.Result.NextCursor; cursor == "" {
				return names, pages
			}
		}
	}

	set("r1", 7)
	names, pages := walk()
	if len(names) != 7 || pages != 4 || names[6] != "r1_t6" {
		t.Fatalf("walk: %v in %d pages", names, pages)
	}
	if r := readsSoFar(); r != 1 {
		t.Errorf("a walk of %d pages read the catalog %d times, want once", pages, r)
	}

	set("r2", 5)
	names, _ = walk()
	if strings.Join(names, ",") != "r2_t0,r2_t1,r2_t2,r2_t3,r2_t4" || readsSoFar() != 1 {
		t.Errorf("walk of a changed catalog: %v after %d reads, want r2's five tools after one", names, readsSoFar())
	}

	set("", 5)
	_, pages = walk()
	if r := readsSoFar(); r != pages {
		t.Errorf("a catalog without a revision: %d reads for %d pages, want one per page", r, pages)
	}
}
