package bus

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"
)

// CatalogPageSize is the page size ListCatalog asks for. Discovery sends
// fewer tools when a page would pass half of max_payload, so this only
// bounds the count.
const CatalogPageSize = 1000

// catalogWalkAttempts is how many times ListCatalog starts a walk again
// after the catalog changed under it.
const catalogWalkAttempts = 3

// detailReason is the Details key naming why a request was refused.
const detailReason = "reason"

// reasonCatalogChanged is the reason of a cursor whose catalog is gone.
const reasonCatalogChanged = "catalog_changed"

// CatalogChanged is the error a catalog page request gets when its cursor
// was issued for a catalog that is no longer the current one: the walk
// must start again from the first page.
func CatalogChanged(generation int64) *Error {
	return &Error{Code: CodeInvalidRequest, Details: map[string]any{detailReason: reasonCatalogChanged},
		Message: "cursor: the catalog changed since this walk began; list again from the first page (current generation " +
			strconv.FormatInt(generation, 10) + ")"}
}

// IsCatalogChanged reports the error CatalogChanged builds (also rebuilt
// from a reply).
func IsCatalogChanged(err error) bool {
	e := AsError(err)
	return e != nil && e.Code == CodeInvalidRequest && e.Details[detailReason] == reasonCatalogChanged
}

// ListCatalog asks subject (mcpbus.tools.list, or the internal catalog)
// for req's whole catalog a page at a time and returns it as one reply:
// every page's tools and bind in order, the catalog-wide fields of the
// first page. When the catalog changes during the walk it starts again
// (up to three walks), so the result is always one catalog.
func ListCatalog(ctx context.Context, nc *nats.Conn, subject string, req ToolsListRequest) (ToolsListReply, error) {
	req.PageSize = CatalogPageSize
	var err error
	for range catalogWalkAttempts {
		var out ToolsListReply
		if out, err = walkCatalog(ctx, nc, subject, req); !IsCatalogChanged(err) {
			return out, err
		}
	}
	return ToolsListReply{}, Wrap(CodeUnavailable, err, "the catalog kept changing while it was read; retry")
}

// walkCatalog is one walk of ListCatalog.
func walkCatalog(ctx context.Context, nc *nats.Conn, subject string, req ToolsListRequest) (ToolsListReply, error) {
	req.Cursor = ""
	out, err := Request[ToolsListReply](ctx, nc, subject, req)
	for err == nil && out.NextCursor != "" {
		req.Cursor = out.NextCursor
		var page ToolsListReply
		if page, err = Request[ToolsListReply](ctx, nc, subject, req); err != nil {
			break
		}
		if page.Revision != out.Revision || page.Generation != out.Generation {
			return ToolsListReply{}, CatalogChanged(page.Generation)
		}
		out.Tools = append(out.Tools, page.Tools...)
		out.Bind = append(out.Bind, page.Bind...)
		out.NextCursor = page.NextCursor
	}
	return out, err
}
