package sharedstate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Snapshot is what a Watcher knows at one moment.
type Snapshot struct {
	Extensions *config.Extensions
	Generation int64
	// Baseline is the startup configuration Extensions is judged against
	// by the drift guard for durable task servers: Extensions itself for a
	// startup publication, the startup publication a later one carries, or
	// nil for a record that carries neither (see ConfigRecord).
	Baseline *config.Extensions
	// BaselineEpoch is the KV revision of Baseline's startup publication
	// (0 with no Baseline).
	BaselineEpoch uint64
	// VirtualServers are the virtual servers made through the admin API
	// (the KV key "virtual_servers"; VirtualRecord).
	VirtualServers []config.VirtualServer
	// VirtualRevision is the KV revision of VirtualServers (0: never
	// written).
	VirtualRevision uint64
}

// Watcher follows the KV keys "config", "generation" and
// "virtual_servers".
type Watcher struct {
	kv  jetstream.KeyValue
	log *slog.Logger
	nc  *nats.Conn // FollowReconnects
	ack *acker     // AckTo; nil: no acknowledgements

	mu        sync.Mutex
	snap      Snapshot
	fromKV    bool
	listeners []func(prev, next Snapshot)
}

// NewWatcher returns a watcher whose config starts as fallback (a local file
// or empty) until the KV bucket has one.
func NewWatcher(kv jetstream.KeyValue, fallback *config.Extensions, log *slog.Logger) *Watcher {
	if fallback == nil {
		fallback = &config.Extensions{}
	}
	return &Watcher{kv: kv, log: log, snap: Snapshot{Extensions: fallback}}
}

// OnChange registers fn, called (outside the lock, in order) after every
// change of config or generation. Register before Start.
func (w *Watcher) OnChange(fn func(prev, next Snapshot)) {
	w.mu.Lock()
	w.listeners = append(w.listeners, fn)
	w.mu.Unlock()
}

// FollowReconnects makes the watch start again as soon as nc reconnects
// (after a NATS server restart, say), reading the current values, instead
// of waiting for the library to notice its consumer is gone (about 20 s).
// Call before Start.
func (w *Watcher) FollowReconnects(nc *nats.Conn) { w.nc = nc }

// Current returns the latest snapshot.
func (w *Watcher) Current() Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap
}

// Start begins watching and returns once the values present in the bucket
// have been applied. The watch runs until ctx is done; done is closed then.
func (w *Watcher) Start(ctx context.Context) (done <-chan struct{}, err error) {
	kw, err := w.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch kv %s: %w", w.kv.Bucket(), err)
	}
	var reconnected chan nats.Status
	if w.nc != nil {
		reconnected = w.nc.StatusChanged(nats.CONNECTED)
	}
	initial := make(chan struct{})
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		// An acknowledging watcher refreshes its key and deletes it when
		// the watch ends (acks.go).
		var refresh <-chan time.Time
		if w.ack != nil {
			t := time.NewTicker(ackRefresh)
			defer t.Stop()
			defer w.dropAck()
			refresh = t.C
		}
		defer func() {
			if kw != nil {
				_ = kw.Stop()
			}
			if reconnected != nil {
				w.nc.RemoveStatusListener(reconnected)
			}
		}()
		seenInitial := false
		var updates <-chan jetstream.KeyValueEntry = kw.Updates()
		for {
			select {
			case <-ctx.Done():
				return
			case <-reconnected:
				// The server may have lost the watch's consumer: watch
				// again; the replay applies whatever changed meanwhile.
				_ = kw.Stop()
				if kw = w.rewatch(ctx); kw == nil {
					return
				}
				updates = kw.Updates()
			case e, ok := <-updates:
				if !ok {
					return
				}
				if e == nil {
					if !seenInitial {
						seenInitial = true
						w.putAck(ctx)
						close(initial)
					}
					continue
				}
				if w.apply(e) && seenInitial {
					w.putAck(ctx)
				}
			case <-refresh:
				w.putAck(ctx)
			}
		}
	}()
	select {
	case <-initial:
		return fin, nil
	case <-ctx.Done():
		return fin, ctx.Err()
	}
}

// rewatchRetry is how often rewatch tries while the bucket cannot be
// watched.
const rewatchRetry = 250 * time.Millisecond

// rewatch starts a new watch, trying until it works or ctx ends (nil).
func (w *Watcher) rewatch(ctx context.Context) jetstream.KeyWatcher {
	for {
		kw, err := w.kv.WatchAll(ctx)
		if err == nil {
			w.log.Info("watching the shared config again after a reconnect")
			return kw
		}
		w.log.Warn("cannot watch the shared config again yet", observability.Err(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(rewatchRetry):
		}
	}
}

// apply applies one entry and reports whether it raised the generation.
func (w *Watcher) apply(e jetstream.KeyValueEntry) (newGen bool) {
	if e.Operation() != jetstream.KeyValuePut {
		return false
	}
	w.mu.Lock()
	prev := w.snap
	next := prev
	switch e.Key() {
	case bus.KVKeyConfig:
		var rec ConfigRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			w.mu.Unlock()
			w.log.Warn("shared config record is not valid JSON; keeping the previous config", observability.Err(err))
			return false
		}
		ext, err := rec.Parse()
		if err != nil {
			w.mu.Unlock()
			w.log.Warn("shared config does not parse; keeping the previous config", observability.Err(err))
			return false
		}
		for _, p := range ext.Problems {
			w.log.Warn("extensions config problem", "problem", p.String())
		}
		next.Extensions = ext
		next.Baseline, next.BaselineEpoch = w.baselineOf(rec, ext, e.Revision(), prev)
		w.fromKV = true
	case bus.KVKeyGen:
		gen, err := strconv.ParseInt(string(e.Value()), 10, 64)
		if err != nil || gen <= prev.Generation {
			w.mu.Unlock()
			return false
		}
		next.Generation = gen
	case bus.KVKeyVirtualServers:
		var rec VirtualRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			w.mu.Unlock()
			w.log.Warn("virtual servers record is not valid JSON; keeping the previous virtual servers", observability.Err(err))
			return false
		}
		next.VirtualServers, next.VirtualRevision = rec.VirtualServers, e.Revision()
	default:
		w.mu.Unlock()
		return false
	}
	w.snap = next
	listeners := append([]func(prev, next Snapshot){}, w.listeners...)
	w.mu.Unlock()
	for _, fn := range listeners {
		fn(prev, next)
	}
	return next.Generation != prev.Generation
}

// baselineOf is the startup configuration of rec (published at revision
// rev and parsed as ext): ext for a startup publication, the baseline rec
// carries (prev's, parsed once, when it is the same epoch), or none.
func (w *Watcher) baselineOf(rec ConfigRecord, ext *config.Extensions, rev uint64, prev Snapshot) (*config.Extensions, uint64) {
	switch {
	case rec.Startup:
		return ext, rev
	case rec.Baseline == nil:
		return nil, 0
	case prev.Baseline != nil && prev.BaselineEpoch == rec.Baseline.Epoch:
		return prev.Baseline, prev.BaselineEpoch
	}
	base, err := config.ParseExtensions(rec.Baseline.Path, rec.Baseline.Raw)
	if err != nil {
		w.log.Warn("shared config's startup baseline does not parse; judging the config as one without a baseline", observability.Err(err))
		return nil, 0
	}
	return base, rec.Baseline.Epoch
}
