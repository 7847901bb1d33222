package toolcall

import (
	"container/list"
	"context"
	"sync"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// sessionKey identifies a pooled session: stdio sessions per server and
// "user:thread" scope, HTTP/SSE sessions per server and the fingerprint of
// the effective headers. owner is the user of a personal connection ("" for
// a deployment server); its runtime name already embeds the user and the
// definition, so the owner only selects what a personal event closes. user
// is the caller whose share of the pool the session counts against (stdio
// sessions; "" for HTTP/SSE sessions, which callers with the same headers
// share).
type sessionKey struct {
	server string
	scope  string
	owner  string
	user   string
}

// session is one upstream connection, created once even under concurrent
// first calls (the others wait on ready).
type session struct {
	key         sessionKey
	fingerprint string // the server's config fingerprint it was created for
	ready       chan struct{}
	client      *mcpclient.Client
	err         error
	elem        *list.Element
	// Guarded by pool.mu: the calls holding the session (get to release),
	// and whether it left the pool to be closed once none does.
	inUse   int
	retired bool
}

// pool is a bounded LRU of sessions, with a bound per user too: a user's
// new session past maxPerUser retires that user's least recently used
// session, never another user's. Dropped and closed sessions are closed
// in the background at once (a stdio child's whole process group is
// killed); evicted and retired ones leave the pool at once but are closed
// only when their last call has returned. closeAll closes everything and
// waits.
type pool struct {
	max        int
	maxPerUser int // 0: no bound per user
	// onExit is told of a session whose stdio process exited while it was
	// pooled (the pool has closed it); may be nil.
	onExit func(sessionKey)

	mu      sync.Mutex
	byKey   map[sessionKey]*session
	lru     *list.List            // front = most recently used
	retired map[*session]struct{} // out of the pool, waiting for their calls
	perUser map[string]int        // pooled sessions by key.user (non-empty users only)
	wg      sync.WaitGroup
	// obs counts what the pool does (observe.go); the zero value counts
	// nothing.
	obs poolObs
}

func newPool(max, maxPerUser int, onExit func(sessionKey)) *pool {
	return &pool{max: max, maxPerUser: maxPerUser, onExit: onExit, byKey: map[sessionKey]*session{}, lru: list.New(),
		retired: map[*session]struct{}{}, perUser: map[string]int{}}
}

// connectFunc opens a new client for a session.
type connectFunc func(context.Context) (*mcpclient.Client, error)

// get returns the session for key, connecting it when absent, created for
// another config fingerprint, or no longer alive (a crashed stdio child is
// replaced here, before the call). Concurrent first callers share one
// connect; a failed connect is not kept. The caller holds the session until
// it calls release.
func (p *pool) get(ctx context.Context, key sessionKey, fingerprint string, connect connectFunc) (*session, error) {
	for {
		p.mu.Lock()
		s, ok := p.byKey[key]
		if ok && s.fingerprint != fingerprint {
			p.removeLocked(s)
			ok = false
		}
		if !ok {
			s = &session{key: key, fingerprint: fingerprint, ready: make(chan struct{}), inUse: 1}
			s.elem = p.lru.PushFront(s)
			p.byKey[key] = s
			if key.user != "" {
				p.perUser[key.user]++
				if p.maxPerUser > 0 && p.perUser[key.user] > p.maxPerUser {
					p.retireLocked(p.oldestOfLocked(key.user))
					p.obs.evicted()
				}
			}
			for p.lru.Len() > p.max {
				p.retireLocked(p.lru.Back().Value.(*session))
				p.obs.evicted()
			}
			p.obs.size(p.lru.Len())
			p.mu.Unlock()
			s.client, s.err = connect(ctx)
			close(s.ready)
			if s.err != nil {
				p.drop(s)
				p.release(s)
				return nil, s.err
			}
			p.obs.spawned()
			if exited := s.client.Exited(); exited != nil {
				go p.dropOnExit(s, exited)
			}
			tracing.SetAttributes(ctx, tracing.SessionReused(false))
			return s, nil
		}
		p.lru.MoveToFront(s.elem)
		s.inUse++
		p.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			p.release(s)
			return nil, ctx.Err()
		}
		if s.err != nil {
			p.release(s)
			return nil, s.err
		}
		if s.client.Alive() {
			tracing.SetAttributes(ctx, tracing.SessionReused(true))
			return s, nil
		}
		p.drop(s) // crashed or closed underneath: replace it
		p.release(s)
	}
}

// drop removes s (if it is still the pooled one for its key) and closes it.
func (p *pool) drop(s *session) { p.dropIfPooled(s) }

// dropIfPooled is drop, reporting whether s was pooled.
func (p *pool) dropIfPooled(s *session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.byKey[s.key]; ok && cur == s {
		p.removeLocked(s)
		return true
	}
	return false
}

// dropOnExit closes s once its process has exited, so a server that dies
// while its session is idle is reaped now, not left a zombie until the
// next call. After a close the process exits too and s is no longer
// pooled: nothing happens then.
func (p *pool) dropOnExit(s *session, exited <-chan struct{}) {
	<-exited
	if p.dropIfPooled(s) && p.onExit != nil {
		p.onExit(s.key)
	}
}

// release ends a call's hold on s (from get); the last call out of a
// retired session closes it.
func (p *pool) release(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.inUse--
	if s.retired && s.inUse == 0 {
		s.retired = false
		delete(p.retired, s)
		p.closeLocked(s)
	}
}

// retireLocked takes s out of the pool and closes it now if no call holds
// it, else when the last one releases it.
func (p *pool) retireLocked(s *session) {
	if !p.unlinkLocked(s) {
		return
	}
	if s.inUse == 0 {
		p.closeLocked(s)
		return
	}
	s.retired = true
	p.retired[s] = struct{}{}
}

// removeLocked takes s out of the pool and closes it now, calls in flight
// or not.
func (p *pool) removeLocked(s *session) {
	if p.unlinkLocked(s) {
		p.closeLocked(s)
	}
}

// oldestOfLocked returns user's least recently used pooled session; the
// caller knows there is one.
func (p *pool) oldestOfLocked(user string) *session {
	for e := p.lru.Back(); e != nil; e = e.Prev() {
		if s := e.Value.(*session); s.key.user == user {
			return s
		}
	}
	return nil
}

// unlinkLocked takes s out of the map and the LRU list; false when it was
// already out.
func (p *pool) unlinkLocked(s *session) bool {
	if cur, ok := p.byKey[s.key]; ok && cur == s {
		delete(p.byKey, s.key)
	}
	if s.elem == nil {
		return false
	}
	p.lru.Remove(s.elem)
	s.elem = nil
	p.obs.size(p.lru.Len())
	if u := s.key.user; u != "" {
		if p.perUser[u]--; p.perUser[u] <= 0 {
			delete(p.perUser, u)
		}
	}
	return true
}

// closeLocked closes s in the background once it is ready.
func (p *pool) closeLocked(s *session) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		<-s.ready
		if s.client != nil {
			_ = s.client.Close()
		}
	}()
}

// closeWhere closes every session whose key matches, retired ones
// included, and returns how many pooled ones it closed.
func (p *pool) closeWhere(match func(sessionKey) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.retired {
		if match(s.key) {
			s.retired = false
			delete(p.retired, s)
			p.closeLocked(s)
		}
	}
	return p.takeWhereLocked(match, p.removeLocked)
}

// retireWhere retires every session whose key matches (closed once its
// calls have returned) and returns how many.
func (p *pool) retireWhere(match func(sessionKey) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeWhereLocked(match, p.retireLocked)
}

// takeWhereLocked applies take to every pooled session whose key matches.
func (p *pool) takeWhereLocked(match func(sessionKey) bool, take func(*session)) int {
	n := 0
	for k, s := range p.byKey {
		if match(k) {
			take(s)
			n++
		}
	}
	return n
}

// closeAll closes every session and waits for the closes.
func (p *pool) closeAll() {
	p.closeWhere(func(sessionKey) bool { return true })
	p.wait()
}

// wait blocks until every close started so far has finished.
func (p *pool) wait() { p.wg.Wait() }

// len is the number of pooled sessions.
func (p *pool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byKey)
}
