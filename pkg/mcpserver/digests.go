package mcpserver

import (
	"maps"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Digests remembered per session (docs/tool-pinning.md). A client that
// never sends _meta["mcpbus/digest"] back is still protected within a
// session: tools/list records the digest of each tool it shows in the
// session (Session.Digests, stored with the session, so every api replica
// holding it checks the same), and a tools/call of a tool without a
// digest carries the remembered one as bus.Call.SessionDigest;
// toolcall refuses it with tool_changed when the definition changed since
// the session listed it. The modern era has no session: its clients send
// the digest, or are not checked. To keep a session small, each digest is
// cut to bus.MinSessionDigest hex digits and at most maxSessionDigests
// tools are remembered (a listing past that: the first ones).

// maxSessionDigests bounds the tools one session remembers.
const maxSessionDigests = 2048

// rememberDigests records the digests of the tools a tools/list page
// shows in x's session (none without a session), marking it changed when
// one is new or different.
func rememberDigests(x *Exchange, tools []mcpTool) {
	sess := x.Session
	if sess == nil {
		return
	}
	cloned := false // the map may be shared with a cached copy: copy on write
	for _, t := range tools {
		if len(t.digest) < bus.MinSessionDigest {
			continue
		}
		d := t.digest[:bus.MinSessionDigest]
		if cur, ok := sess.Digests[t.Name]; ok && cur == d {
			continue
		} else if !ok && len(sess.Digests) >= maxSessionDigests {
			continue
		}
		if !cloned {
			sess.Digests, cloned = maps.Clone(sess.Digests), true
			if sess.Digests == nil {
				sess.Digests = map[string]string{}
			}
		}
		sess.Digests[t.Name] = d
		x.Changed = true
	}
}

// listedDigest is the digest x's session listed tool with, "" when it
// has none.
func listedDigest(x *Exchange, tool string) string {
	if x.Session == nil {
		return ""
	}
	return x.Session.Digests[tool]
}
