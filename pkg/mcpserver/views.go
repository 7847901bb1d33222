package mcpserver

import "sync"

// maxViews bounds the tools/list views kept; past it the oldest is
// dropped (a walk that loses its view reads the catalog again).
const maxViews = 16

// viewKey is everything a tools/list view depends on: the caller (their
// catalog holds their personal connections), whether task execution is
// shown, the thread's promoted tools and the catalog's revision (which
// changes with any tool, personal ones included).
type viewKey struct {
	user     string
	set      string // the virtual server
	tasks    bool
	promoted string
	revision string
}

// views keeps the tools/list views built from catalogs, so the pages of a
// walk after the first are slices of one built list. A view is never
// changed once put. Safe for concurrent use.
type views struct {
	mu    sync.Mutex
	byKey map[viewKey][]mcpTool
	order []viewKey // oldest first
}

// get returns the view of key; one of an unknown revision ("") is never
// kept.
func (v *views) get(key viewKey) ([]mcpTool, bool) {
	if key.revision == "" {
		return nil, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	tools, ok := v.byKey[key]
	return tools, ok
}

// put keeps tools as the view of key, dropping the oldest view when full.
func (v *views) put(key viewKey, tools []mcpTool) {
	if key.revision == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byKey == nil {
		v.byKey = map[viewKey][]mcpTool{}
	}
	if _, ok := v.byKey[key]; ok {
		return
	}
	if len(v.order) >= maxViews {
		delete(v.byKey, v.order[0])
		v.order = v.order[1:]
	}
	v.byKey[key] = tools
	v.order = append(v.order, key)
}
