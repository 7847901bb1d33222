// Package kvcache mirrors a JetStream KV bucket in a process's memory so
// that a hot read costs no bus round trip, while every process sharing the
// bucket sees every other's writes: a watch of the whole bucket applies
// each put, delete and purge as the stream orders them (the invalidation is
// cross-process), and a read the mirror cannot answer for certain falls
// back to a Get of the bucket.
//
// The mirror answers a read only while its watch runs. It falls back to
// the bucket for a key it does not hold (a write from another process the
// watch has not delivered yet), for an entry older than the bucket's TTL
// (the bucket expires entries without telling watchers) and for a key
// Invalidate marked (an announced write, so the read after the
// announcement sees it). With AuthoritativeMisses a key absent after the
// watch's initial values is absent from the bucket: for buckets where a
// read of a missing key is the common case, and whose writers announce
// their writes (Invalidate) to the readers that must see them at once.
//
// A Get that finds a revision the watch already passed, for a key the
// mirror does not hold, answers not found: the watch saw that revision
// and a later delete. Purge through the Cache tombstones the key locally,
// so neither a late watch delivery nor a Get in flight brings it back.
//
// Memory: every process holds every entry of the bucket, decoded.
package kvcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Options configure a Cache.
type Options struct {
	// TTL is the bucket's TTL: a mirrored entry written longer ago is read
	// from the bucket again. Zero: entries do not expire.
	TTL time.Duration
	// AuthoritativeMisses: once the watch delivered the bucket's initial
	// values, a key the mirror does not hold (and Invalidate did not mark)
	// is not in the bucket, without a Get.
	AuthoritativeMisses bool
	// NC and SyncSubject make Purge wait until every mirror of the bucket
	// (every watcher of its stream) applied the purge, for up to
	// SyncTimeout (default 2s): a key purged by one process is then gone
	// from every process's mirror when Purge returns. Every Cache of the
	// bucket must use the same subject. Without them Purge returns once the
	// bucket applied it and the other mirrors follow with their watch.
	NC          *nats.Conn
	SyncSubject string
	SyncTimeout time.Duration
	Log         *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

type entry[V any] struct {
	v       V
	rev     uint64
	written time.Time
}

// Cache mirrors one bucket whose values decode to V. Safe for concurrent
// use. Values are returned as stored: V should be a value type whose
// shared parts callers do not modify.
type Cache[V any] struct {
	kv     jetstream.KeyValue
	decode func([]byte) (V, error)
	opt    Options

	mu       sync.RWMutex
	m        map[string]entry[V]
	stale    map[string]struct{}  // Invalidate marked: read from the bucket once
	tombs    map[string]time.Time // purged here: until the watch delivers the purge (or tombLife)
	applied  uint64               // the highest revision the watch applied
	watching bool                 // the watch runs: the mirror may answer
	synced   bool                 // the watch delivered the initial values
	advanced chan struct{}        // closed and replaced when applied grows
	stop     func()
	done     chan struct{}
}

// New returns a cache of kv that decodes values with decode. It answers
// every read from the bucket until Start.
func New[V any](kv jetstream.KeyValue, decode func([]byte) (V, error), opt Options) *Cache[V] {
	opt.Log = cmp.Or(opt.Log, observability.Discard())
	opt.SyncTimeout = cmp.Or(opt.SyncTimeout, 2*time.Second)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Cache[V]{kv: kv, decode: decode, opt: opt, m: map[string]entry[V]{}, stale: map[string]struct{}{}, tombs: map[string]time.Time{}, advanced: make(chan struct{})}
}

// Start watches the bucket and waits until the watch delivered its initial
// values (or ctx ends; the watch then goes on and the mirror answers once
// it caught up). Stop ends the watch.
func (c *Cache[V]) Start(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.Background())
	w, err := c.kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return fmt.Errorf("kvcache: watch %s: %w", c.kv.Bucket(), err)
	}
	var sub *nats.Subscription
	if c.opt.NC != nil && c.opt.SyncSubject != "" {
		if sub, err = c.opt.NC.Subscribe(c.opt.SyncSubject, c.answerSync); err == nil {
			err = c.opt.NC.Flush()
		}
		if err != nil {
			_ = w.Stop()
			cancel()
			return fmt.Errorf("kvcache: subscribe %s: %w", c.opt.SyncSubject, err)
		}
	}
	synced := make(chan struct{})
	c.mu.Lock()
	c.watching, c.done = true, make(chan struct{})
	c.stop = func() {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		cancel()
		_ = w.Stop()
	}
	done := c.done
	c.mu.Unlock()
	go c.run(wctx, w, synced, done)
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return nil
	}
}

// Stop ends the watch; reads go to the bucket from then on.
func (c *Cache[V]) Stop() {
	c.mu.Lock()
	stop, done := c.stop, c.done
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (c *Cache[V]) run(ctx context.Context, w jetstream.KeyWatcher, synced, done chan struct{}) {
	defer close(done)
	defer func() {
		c.mu.Lock()
		c.watching, c.synced = false, false
		c.m, c.stale, c.tombs = map[string]entry[V]{}, map[string]struct{}{}, map[string]time.Time{}
		c.mu.Unlock()
	}()
	once := sync.OnceFunc(func() { close(synced) })
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() == nil {
					c.opt.Log.Warn("kv watch ended; reading the bucket from now on", "bucket", c.kv.Bucket())
				}
				return
			}
			if e == nil {
				c.mu.Lock()
				c.synced = true
				c.mu.Unlock()
				once()
				continue
			}
			c.apply(e)
		}
	}
}

// apply is one watched update.
func (c *Cache[V]) apply(e jetstream.KeyValueEntry) {
	key, rev := e.Key(), e.Revision()
	var v V
	var derr error
	if e.Operation() == jetstream.KeyValuePut {
		v, derr = c.decode(e.Value())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev > c.applied {
		c.applied = rev
		close(c.advanced)
		c.advanced = make(chan struct{})
	}
	switch e.Operation() {
	case jetstream.KeyValuePut:
		if _, ok := c.tombs[key]; ok {
			return
		}
		if cur, ok := c.m[key]; ok && cur.rev >= rev {
			return
		}
		if derr != nil {
			delete(c.m, key) // read from the bucket, which fails the same way
			c.opt.Log.Warn("kv entry not decoded", "bucket", c.kv.Bucket(), observability.Err(derr))
			return
		}
		c.m[key] = entry[V]{v: v, rev: rev, written: c.clamp(e.Created())}
	default: // delete, purge
		delete(c.m, key)
		delete(c.tombs, key)
	}
}

// clamp is t, or now when t is later (a NATS server clock ahead of ours
// must not extend an entry's life here).
func (c *Cache[V]) clamp(t time.Time) time.Time {
	if now := c.opt.Now(); t.After(now) {
		return now
	}
	return t
}

func (c *Cache[V]) fresh(e entry[V]) bool {
	return c.opt.TTL <= 0 || c.opt.Now().Sub(e.written) < c.opt.TTL
}

// Get returns key's value, and false when the bucket has none.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, bool, error) {
	var zero V
	c.mu.RLock()
	e, held := c.m[key]
	_, stale := c.stale[key]
	_, tomb := c.tombs[key]
	watching, synced, applied := c.watching, c.synced, c.applied
	c.mu.RUnlock()
	if tomb && watching {
		return zero, false, nil
	}
	if watching && !stale {
		if held && c.fresh(e) {
			return e.v, true, nil
		}
		if !held && synced && c.opt.AuthoritativeMisses {
			return zero, false, nil
		}
	}
	got, err := c.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		if stale {
			c.mu.Lock()
			delete(c.stale, key)
			delete(c.m, key)
			c.mu.Unlock()
		}
		return zero, false, nil
	}
	if err != nil {
		return zero, false, fmt.Errorf("kvcache: get from %s: %w", c.kv.Bucket(), err)
	}
	rev := got.Revision()
	if watching && synced && !held && !stale && rev <= applied {
		return zero, false, nil // the watch passed this revision and then a delete
	}
	v, err := c.decode(got.Value())
	if err != nil {
		return zero, false, fmt.Errorf("kvcache: decode entry of %s: %w", c.kv.Bucket(), err)
	}
	c.mu.Lock()
	if _, tomb := c.tombs[key]; !tomb && c.watching {
		if cur, ok := c.m[key]; !ok || cur.rev < rev {
			c.m[key] = entry[V]{v: v, rev: rev, written: c.clamp(got.Created())}
		}
		delete(c.stale, key)
	}
	c.mu.Unlock()
	return v, true, nil
}

// Put writes raw (the encoding of v) under key and mirrors it at once.
func (c *Cache[V]) Put(ctx context.Context, key string, raw []byte, v V) error {
	rev, err := c.kv.Put(ctx, key, raw)
	if err != nil {
		return fmt.Errorf("kvcache: put into %s: %w", c.kv.Bucket(), err)
	}
	c.mu.Lock()
	if _, tomb := c.tombs[key]; !tomb && c.watching {
		if cur, ok := c.m[key]; !ok || cur.rev < rev {
			c.m[key] = entry[V]{v: v, rev: rev, written: c.opt.Now()}
		}
		delete(c.stale, key)
	}
	c.mu.Unlock()
	return nil
}

// Purge removes key from the bucket and from the mirror at once (every
// other process's mirror drops it when its watch delivers the purge). It is
// meant for keys that are not written again (a session id): a write of key
// within a minute of its purge may stay unseen here for that minute.
func (c *Cache[V]) Purge(ctx context.Context, key string) error {
	if err := c.kv.Purge(ctx, key); err != nil {
		return fmt.Errorf("kvcache: purge from %s: %w", c.kv.Bucket(), err)
	}
	c.mu.Lock()
	delete(c.m, key)
	delete(c.stale, key)
	watching := c.watching
	if c.watching {
		now := c.opt.Now()
		for k, at := range c.tombs {
			if now.Sub(at) > tombLife {
				delete(c.tombs, k) // the watch delivered its purge before it was recorded
			}
		}
		c.tombs[key] = now
	}
	c.mu.Unlock()
	if watching && c.opt.NC != nil && c.opt.SyncSubject != "" {
		c.sync(ctx)
	}
	return nil
}

// sync waits until every watcher of the bucket's stream (every mirror)
// applied its last revision, for up to SyncTimeout: each answers on
// SyncSubject once its watch got there. A watcher that does not answer (a
// process that died and whose consumer the server has not dropped yet, or
// a watcher that is not a Cache) costs the timeout; the purge stands.
func (c *Cache[V]) sync(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.opt.SyncTimeout)
	defer cancel()
	st, err := c.kv.Status(ctx)
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if err != nil || !ok {
		c.opt.Log.Warn("kv purge not synchronized: no bucket status", "bucket", c.kv.Bucket(), observability.Err(err))
		return
	}
	info := bs.StreamInfo()
	inbox := c.opt.NC.NewRespInbox()
	sub, err := c.opt.NC.SubscribeSync(inbox)
	if err != nil {
		c.opt.Log.Warn("kv purge not synchronized", "bucket", c.kv.Bucket(), observability.Err(err))
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.opt.NC.PublishRequest(c.opt.SyncSubject, inbox, strconv.AppendUint(nil, info.State.LastSeq, 10)); err != nil {
		c.opt.Log.Warn("kv purge not synchronized", "bucket", c.kv.Bucket(), observability.Err(err))
		return
	}
	for got := 0; got < info.State.Consumers; got++ {
		if _, err := sub.NextMsgWithContext(ctx); err != nil {
			c.opt.Log.Info("kv purge: not every mirror confirmed it in time", "bucket", c.kv.Bucket(),
				"confirmed", got, "watchers", info.State.Consumers)
			return
		}
	}
}

// answerSync answers a sync request once the watch applied the revision it
// names (or after SyncTimeout, without an answer).
func (c *Cache[V]) answerSync(m *nats.Msg) {
	rev, err := strconv.ParseUint(string(m.Data), 10, 64)
	if err != nil || m.Reply == "" {
		return
	}
	go func() {
		timeout := time.NewTimer(c.opt.SyncTimeout)
		defer timeout.Stop()
		for {
			c.mu.RLock()
			applied, advanced, watching := c.applied, c.advanced, c.watching
			c.mu.RUnlock()
			if !watching {
				return
			}
			if applied >= rev {
				_ = m.Respond(nil)
				return
			}
			select {
			case <-advanced:
			case <-timeout.C:
				return
			}
		}
	}()
}

// tombLife bounds how long a purged key stays tombstoned when the watch
// delivered its purge before Purge recorded it.
const tombLife = time.Minute

// Invalidate makes the next read of key go to the bucket: another process
// announced a write of key that the watch may not have delivered yet.
func (c *Cache[V]) Invalidate(key string) {
	c.mu.Lock()
	if c.watching {
		c.stale[key] = struct{}{}
	}
	c.mu.Unlock()
}
