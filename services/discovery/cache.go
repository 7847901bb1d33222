package discovery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/flight"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// discoverFunc discovers one server's raw tools (see discoverer.discover).
// owner is the user whose personal connection srv is ("" for a deployment
// server).
type discoverFunc func(ctx context.Context, srv *config.Server, owner string) (discovered, error)

// discovered is what one discovery learnt: the raw tools and the protocol
// era and version the server was spoken to in (cached with the entry).
type discovered struct {
	tools []mcpclient.Tool
	// digests are the tools' definition digests, in order (pinning),
	// computed once per discovery.
	digests         []string
	era             mcpclient.Era
	protocolVersion string
	fed             fedLists
}

// entry is one server's cached discovery: the tools together with the
// canonical snapshot of the server's configuration (its fingerprint) and the
// interceptor chain they were discovered with. owner is set for a personal
// connection (keyed by its runtime name) and names the user it belongs to.
// gen is the generation it was discovered in: an entry of an older
// generation is stale, served until its rediscovery ends (refresh.go).
type entry struct {
	owner        string
	fingerprint  string
	interceptors string
	gen          int64
	tools        []mcpclient.Tool
	digests      []string // per tool, in order (discovered.digests)
	discoveredAt time.Time
	// era and protocolVersion are how the server was spoken to.
	era             mcpclient.Era
	protocolVersion string
	// fed are its prompts, resources and templates (federation.go).
	fed fedLists
}

func (e *entry) matches(srv *config.Server, chain string) bool {
	return e != nil && e.fingerprint == srv.Fingerprint && e.interceptors == chain
}

// failure is a server's last failed discovery in this generation: count
// consecutive failures of the same configuration, the last at at, and the
// published catalog retries it from nextRetry on (retryPolicy). stderr is
// the redacted stderr tail of a stdio server, for admins only.
type failure struct {
	owner        string
	fingerprint  string
	interceptors string
	message      string
	// code is the error's code (auth_required: the server waits for an
	// account to be connected).
	code      bus.Code
	stderr    string
	at        time.Time
	count     int
	nextRetry time.Time
}

// allWaiting reports failed servers that all wait for an account to be
// connected: nothing failed, so the (empty) catalog is published with
// them in failed_servers rather than refused as unavailable.
func allWaiting(failed []bus.FailedServer) bool {
	for _, f := range failed {
		if f.Code != bus.CodeAuthRequired {
			return false
		}
	}
	return len(failed) > 0
}

// failedCode is the code a failed_servers entry carries: auth_required
// (the server waits for an account to be connected), else none.
func failedCode(code bus.Code) bus.Code {
	if code == bus.CodeAuthRequired {
		return code
	}
	return ""
}

// matches reports a failure of srv's current configuration under chain.
func (f failure) matches(srv *config.Server, chain string) bool {
	return f.count > 0 && f.fingerprint == srv.Fingerprint && f.interceptors == chain
}

// retryPolicy is the capped exponential backoff of failed servers: the
// n-th consecutive failure is retried after initial·2^(n-1), at most max.
type retryPolicy struct {
	initial, max time.Duration
}

// after is the wait after the n-th consecutive failure (n ≥ 1).
func (p retryPolicy) after(n int) time.Duration {
	d := p.initial
	for i := 1; i < n && d < p.max; i++ {
		d *= 2
	}
	return min(d, p.max)
}

// cache is the per-server tool cache, keyed by server name. A server
// whose entry matches its configuration and the interceptor chain is never
// re-discovered; editing, disabling or deleting a server drops only its
// entry; a newer generation makes every deployment server's entry stale:
// it is served while that server is rediscovered in the background, and
// replaced (or the server marked failed) when its rediscovery ends, each
// server on its own (refresh.go). The last published catalog
// is kept per (configuration, generation), so a lookup that finds it talks
// to nobody, except that a lookup finding a failed server due for its retry
// (retryPolicy) starts a pass in the background that discovers the failed
// servers due, and only them. Safe for concurrent use.
type cache struct {
	log      *slog.Logger
	discover discoverFunc
	// pin applies tool pinning to a successful discovery (pinning.go);
	// nil: none.
	pin       pinFunc
	ts        config.ToolSearch
	guard     *driftGuard
	onPublish func(*catalog)
	// onReady announces the catalog republished once server's background
	// rediscovery ended (refresh.go); may be nil.
	onReady func(cat *catalog, server string)
	// fetchPersonal reads a user's personal connections; pc bounds it.
	fetchPersonal personalFetchFunc
	// fetchStates reads which of a user's accounts on per-user servers
	// are not connected (nil: not shown).
	fetchStates accountStatesFunc
	pc          personalConfig
	retry       retryPolicy
	now         func() time.Time

	// life bounds every discovery; close cancels it.
	life  context.Context
	stop  context.CancelFunc
	tasks sync.WaitGroup

	mu       sync.Mutex
	gen      int64
	entries  map[string]*entry
	failures map[string]failure
	// flights are the discoveries by server name; discoveries runs them
	// (flight.go).
	flights     map[string]*inFlight
	discoveries flight.Group[flightKey, discovered]
	// rounds counts each server's rediscoveries after its list_changed
	// (rediscover.go).
	rounds map[string]uint64
	// passes are the lookups in flight, one per configuration and
	// generation.
	passes  flight.Group[passKey, passResult]
	current *catalog
	// lastExt is the configuration of the latest pass: a background
	// rediscovery republishes it (refresh.go).
	lastExt *config.Extensions
	lastErr *bus.Error // why the last lookup published nothing
	// held are the servers the drift guard holds back, with the reason
	// (drift.go), as of the last lookup that was not already published.
	held map[string]string
	// retryAt is when the first failed server of current is due for a
	// retry (zero: none failed).
	retryAt time.Time

	// users holds each user's personal connections (personal.go);
	// userFetches the reads of them in flight.
	users       map[string]*personalSet
	userFetches flight.Group[string, *personalSet]
	// personalWarn rate-limits the warning for unreadable personal
	// connections: while the api is down every lookup would log it.
	personalWarn struct {
		last       time.Time
		suppressed int
	}
}

func newCache(log *slog.Logger, discover discoverFunc, ts config.ToolSearch, guard *driftGuard, onPublish func(*catalog),
	fetchPersonal personalFetchFunc, pc personalConfig, retry retryPolicy, now func() time.Time) *cache {
	life, stop := context.WithCancel(context.Background())
	return &cache{
		log: log, discover: discover, ts: ts, guard: guard, onPublish: onPublish,
		fetchPersonal: fetchPersonal, pc: pc, retry: retry, now: now,
		life: life, stop: stop,
		entries: map[string]*entry{}, failures: map[string]failure{}, flights: map[string]*inFlight{}, rounds: map[string]uint64{},
		users: map[string]*personalSet{},
	}
}

// observe applies a generation: a newer one makes the deployment servers'
// entries stale (served until their rediscovery ends, see refresh.go) and
// drops every failure (retried at once), the published catalog, personal
// connections' entries and every user's personal connections (read again
// on their next lookup). Discoveries of older generations still running
// finish, but their results are not stored.
func (c *cache) observe(gen int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen <= c.gen {
		return false
	}
	c.gen = gen
	for name, e := range c.entries {
		if e.owner != "" {
			delete(c.entries, name)
		}
	}
	c.failures = map[string]failure{}
	c.current = nil
	c.lastErr = nil
	c.retryAt = time.Time{}
	c.users = map[string]*personalSet{}
	c.userFetches.ForgetAll()
	return true
}

// close cancels running discoveries and waits for them: the warm-ups
// first (they start passes), then the passes (they start discoveries).
func (c *cache) close() {
	c.mu.Lock()
	c.stop()
	c.mu.Unlock()
	c.tasks.Wait()
	c.passes.Wait()
	c.userFetches.Wait()
	c.discoveries.Wait()
}

// warm runs a lookup in the background (after a start, a reset or a config
// change), so the next request finds the catalog ready.
func (c *cache) warm(snap sharedstate.Snapshot) {
	if c.life.Err() != nil {
		return
	}
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		if _, err := c.get(c.life, snap); err != nil && c.life.Err() == nil {
			c.log.Warn("catalog warm-up published nothing", observability.Err(err))
		}
	}()
}

// published returns the catalog already published for snap, if any. When
// one of its failed servers is due for a retry, it starts the retry pass
// in the background (a later lookup finds its result).
func (c *cache) published(snap sharedstate.Snapshot) *catalog {
	c.mu.Lock()
	cat := c.current
	if cat == nil || cat.ext != snap.Extensions || cat.gen != c.gen || snap.Generation > c.gen {
		c.mu.Unlock()
		return nil
	}
	due := !c.retryAt.IsZero() && !c.now().Before(c.retryAt)
	c.mu.Unlock()
	if due && c.life.Err() == nil {
		c.joinPass(snap.Extensions)
	}
	return cat
}

// maxPassRetries bounds how often a lookup restarts because the generation
// moved while it waited.
const maxPassRetries = 3

// get returns the catalog for snap, discovering the servers that have no
// matching entry, all concurrently, each bounded by its own
// session_init_timeout. Concurrent lookups of one configuration share one
// pass, and passes share discoveries. A failed server is absent and
// reported in failed_servers; when every enabled server fails nothing is
// published and the error is unavailable, so the next lookup retries. A
// pass goes on when ctx ends first, so a later lookup finds its result.
func (c *cache) get(ctx context.Context, snap sharedstate.Snapshot) (*catalog, error) {
	c.observe(snap.Generation)
	for range maxPassRetries {
		if cat := c.published(snap); cat != nil {
			return cat, nil
		}
		c.mu.Lock()
		c.held = c.guard.held(snap)
		c.mu.Unlock()
		p, err := c.joinPass(snap.Extensions).Wait(ctx)
		if flight.WaitEnded(err) {
			return nil, bus.Wrap(bus.CodeUpstreamTimeout, ctx.Err(), "tool discovery did not finish before the request's deadline; it goes on in the background")
		}
		if !p.retry {
			return p.cat, err
		}
	}
	return nil, bus.Errorf(bus.CodeUnavailable, "the tool cache kept being reset during discovery; retry")
}

// passKey identifies a pass: one configuration in one generation.
type passKey struct {
	ext *config.Extensions
	gen int64
}

// passResult is what a pass gives its waiters. retry is true when the
// generation moved while it waited.
type passResult struct {
	cat   *catalog
	retry bool
}

// joinPass returns the running pass for ext in the current generation,
// starting one (on c.life) if there is none.
func (c *cache) joinPass(ext *config.Extensions) *flight.Call[passResult] {
	c.mu.Lock()
	key := passKey{ext, c.gen}
	c.mu.Unlock()
	p, _ := c.passes.Start(c.life, key, func(ctx context.Context, _ func() bool) (passResult, error) {
		cat, retry, err := c.pass(ctx, ext, true)
		return passResult{cat: cat, retry: retry}, err
	})
	return p
}

// pass performs one lookup for ext. retry is true when the generation moved
// while it waited. announce says a changed catalog is announced
// (onPublish); a rediscovery after a list_changed announces its own.
func (c *cache) pass(ctx context.Context, ext *config.Extensions, announce bool) (cat *catalog, retry bool, err error) {
	enabled := ext.Enabled()
	chain := ext.InterceptorsFingerprint()

	c.mu.Lock()
	gen := c.gen
	// A pass over the published catalog's configuration is a retry: a
	// failed server whose retry is not due yet stays failed.
	retrying := c.current != nil && c.current.ext == ext && c.current.gen == gen
	now := c.now()
	c.lastExt = ext
	cached := map[string]*entry{}
	waits := map[string]*inFlight{}
	notDue := map[string]bus.FailedServer{} // server → its last error, or why it is held back
	for _, srv := range enabled {
		if why, ok := c.held[srv.Name]; ok {
			notDue[srv.Name] = bus.FailedServer{Server: srv.Name, Error: why}
			continue
		}
		if e := c.entries[srv.Name]; e.matches(srv, chain) && e.owner == "" {
			cached[srv.Name] = e
			if e.gen != gen {
				c.refreshLocked(srv, chain, gen)
			}
			continue
		}
		if f := c.failures[srv.Name]; retrying && f.owner == "" && f.matches(srv, chain) && now.Before(f.nextRetry) {
			notDue[srv.Name] = bus.FailedServer{Server: srv.Name, Error: f.message, Code: failedCode(f.code)}
			continue
		}
		waits[srv.Name] = c.flightLocked(srv, chain, gen, "")
	}
	c.mu.Unlock()

	for _, f := range waits {
		select {
		case <-f.done():
		case <-ctx.Done():
			return nil, false, bus.Wrap(bus.CodeUnavailable, ctx.Err(), "the discovery service is stopping")
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return nil, true, nil
	}
	var found []serverTools
	var failed []bus.FailedServer
	for _, srv := range enabled {
		if e, ok := cached[srv.Name]; ok {
			// A stale entry whose rediscovery ended since is replaced by
			// its result.
			if cur := c.entries[srv.Name]; cur.matches(srv, chain) && cur.owner == "" {
				e = cur
			} else if f := c.failures[srv.Name]; f.owner == "" && f.matches(srv, chain) {
				failed = append(failed, bus.FailedServer{Server: srv.Name, Error: f.message, Code: failedCode(f.code)})
				continue
			}
			found = append(found, serverTools{srv: srv, tools: e.tools, digests: e.digests, era: e.era, fed: e.fed})
			continue
		}
		if fs, ok := notDue[srv.Name]; ok {
			failed = append(failed, fs)
			continue
		}
		d, err := waits[srv.Name].result()
		if err != nil {
			failed = append(failed, bus.FailedServer{Server: srv.Name, Error: bus.AsError(err).Message, Code: failedCode(bus.AsError(err).Code)})
			continue
		}
		found = append(found, serverTools{srv: srv, tools: d.tools, digests: d.digests, era: d.era, fed: d.fed})
	}
	c.dropMissingLocked(enabled)
	if len(enabled) > 0 && len(found) == 0 && !allWaiting(failed) {
		err := bus.Errorf(bus.CodeUnavailable, "every enabled MCP server failed discovery (%d); nothing was published, the next lookup retries", len(failed))
		err.Details = map[string]any{"failed_servers": failed}
		c.lastErr, c.current = err, nil
		return nil, false, err
	}
	cat, err = buildCatalog(ext, gen, found, failed, c.ts, c.log)
	if err != nil {
		c.lastErr, c.current = bus.AsError(err), nil
		return nil, false, err
	}
	c.lastErr = nil
	prev := c.current
	c.current = cat
	c.retryAt = c.firstRetryLocked(enabled, chain, failed)
	if announce && c.onPublish != nil && (prev == nil || prev.revision != cat.revision || prev.gen != cat.gen) {
		c.onPublish(cat)
	}
	return cat, false, nil
}

// dropMissingLocked drops the entries of deployment servers that are not
// enabled in the configuration being published (disabled or deleted).
// Personal connections' entries follow their users' sets instead
// (storePersonalLocked).
func (c *cache) dropMissingLocked(enabled []*config.Server) {
	keep := make(map[string]bool, len(enabled))
	for _, s := range enabled {
		keep[s.Name] = true
	}
	for name, e := range c.entries {
		if e.owner == "" && !keep[name] {
			delete(c.entries, name)
		}
	}
	for name, f := range c.failures {
		if f.owner == "" && !keep[name] {
			delete(c.failures, name)
		}
	}
}

// firstRetryLocked is when the first of the failed servers is due for a
// retry (zero: none has a retry pending). c.mu must be held.
func (c *cache) firstRetryLocked(enabled []*config.Server, chain string, failed []bus.FailedServer) time.Time {
	var first time.Time
	for _, fs := range failed {
		for _, srv := range enabled {
			if srv.Name != fs.Server {
				continue
			}
			if f := c.failures[srv.Name]; f.owner == "" && f.matches(srv, chain) && (first.IsZero() || f.nextRetry.Before(first)) {
				first = f.nextRetry
			}
		}
	}
	return first
}
