package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A tools/list walk reads the caller's catalog at most once, whatever its
// number of pages: pages are slices of the list built for the catalog's
// revision, and a walk of a catalog whose list is kept only asks for the
// revision. A changed catalog is read again and listed as it is now; a
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

	// The first walk asks for the revision (a one-tool page), then reads
	// the catalog once; the next walk of the same catalog asks for the
	// revision only.
	set("r1", 7)
	names, pages := walk()
	if len(names) != 7 || pages != 4 || names[6] != "r1_t6" {
		t.Fatalf("walk: %v in %d pages", names, pages)
	}
	if r := readsSoFar(); r != 2 {
		t.Errorf("a walk of %d pages sent %d catalog requests, want 2 (the revision, the catalog)", pages, r)
	}
	set("r1", 7)
	if names, _ = walk(); len(names) != 7 || readsSoFar() != 1 {
		t.Errorf("a walk of a kept catalog: %d tools after %d requests, want 7 after 1 (the revision)", len(names), readsSoFar())
	}

	set("r2", 5)
	names, _ = walk()
	if strings.Join(names, ",") != "r2_t0,r2_t1,r2_t2,r2_t3,r2_t4" || readsSoFar() != 2 {
		t.Errorf("walk of a changed catalog: %v after %d requests, want r2's five tools after two", names, readsSoFar())
	}

	set("", 5)
	_, pages = walk()
	if r := readsSoFar(); r != pages+1 {
		t.Errorf("a catalog without a revision: %d requests for %d pages, want the revision and one read per page", r, pages)
	}
}
