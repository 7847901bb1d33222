package virtual

import (
	"sync"
	"sync/atomic"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// Live is the registry a service serves with: config.yaml's virtual
// servers, plus the admin API's as the shared state carries them (the KV
// key "virtual_servers", applied by Apply on every replica), swapped
// whole so a request sees one registry or the next, never a mix. Safe for
// concurrent use.
type Live struct {
	file config.VirtualSettings

	mu  sync.Mutex // serialises Apply
	rev uint64     // the API record applied (its KV revision)
	cur atomic.Pointer[Registry]
}

// NewLive serves config.yaml's virtual servers (file) until Apply adds
// the admin API's.
func NewLive(file config.VirtualSettings) *Live {
	l := &Live{file: file}
	l.cur.Store(NewRegistry(file))
	return l
}

// Registry is the registry in force.
func (l *Live) Registry() *Registry { return l.cur.Load() }

// File is config.yaml's virtual servers and NATS identities.
func (l *Live) File() config.VirtualSettings { return l.file }

// Apply compiles the admin API's virtual servers fromAPI, written at KV
// revision rev, over config.yaml's (Compile); a revision already applied
// changes nothing.
func (l *Live) Apply(rev uint64, fromAPI []config.VirtualServer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rev == l.rev {
		return
	}
	l.rev = rev
	l.cur.Store(Compile(l.file, fromAPI))
}
