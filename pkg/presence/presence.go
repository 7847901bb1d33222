// Package presence keeps the list of the live replicas of a service and
// picks, for any key, the one replica that owns it, so that replicas agree
// on where a piece of state lives (a stdio session of a thread, say)
// without asking each other.
//
// Every replica puts a heartbeat under "<group>.<id>" in a JetStream KV
// bucket (bus.Names.PresenceBucket) and watches the group's keys. A replica is
// live while its heartbeats keep coming (Config.Expire after the last one)
// and gone at once when it leaves (its key is deleted on the way out).
// Owner uses rendezvous hashing over the live replicas, so when one joins
// or leaves only the keys it gains or held move.
//
// Views converge within a heartbeat but are not atomic: while a replica
// joins or dies, two replicas may briefly name different owners. Callers
// must treat ownership as a strong hint, not a lock.
package presence

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config names a replica and paces its heartbeats.
type Config struct {
	// Group is the service (a KV key token: letters, digits, - and _).
	Group string
	// Self is this replica's id, unique in the group (same alphabet).
	Self string
	// Interval between heartbeats. Defaults to 2s.
	Interval time.Duration
	// Expire is how long after its last heartbeat a replica counts as
	// gone. Defaults to three intervals.
	Expire time.Duration
	// Conn, when set, makes the tracker read the group again as soon as
	// it reconnects (a NATS server restart loses the watch's consumer; the
	// library would notice only after about 20 s).
	Conn *nats.Conn
}

// Tracker follows one group from one replica.
type Tracker struct {
	kv  jetstream.KeyValue
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	seen     map[string]time.Time // replica id → last heartbeat, local clock
	live     []string             // sorted ids of the live replicas, self included
	onChange []func()
	goneWait map[string]chan struct{} // per live id, closed when it leaves the live set (GoneCh)
}

// New returns a tracker for cfg on kv. Start begins the heartbeats.
func New(kv jetstream.KeyValue, cfg Config, log *slog.Logger) *Tracker {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Expire <= 0 {
		cfg.Expire = 3 * cfg.Interval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tracker{kv: kv, cfg: cfg, log: log, seen: map[string]time.Time{}, live: []string{cfg.Self}}
}

// OnChange registers fn to run after the set of live replicas changes (on
// the tracker's goroutine, or Start's caller for the first read). fn must
// not block for long. Register before Start.
func (t *Tracker) OnChange(fn func()) { t.onChange = append(t.onChange, fn) }

// Start puts the first heartbeat and reads the group's current replicas,
// then keeps both up to date until ctx ends, when it deletes this replica's
// key (so the others stop routing to it at once) and closes done.
func (t *Tracker) Start(ctx context.Context) (done <-chan struct{}, err error) {
	if t.cfg.Group == "" || t.cfg.Self == "" {
		return nil, errors.New("presence: group and self are required")
	}
	w, err := t.sync(ctx)
	if err != nil {
		return nil, err
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t.loop(ctx, w)
	}()
	return finished, nil
}

// sync puts a heartbeat, starts watching the group and replaces what the
// tracker knows with the group's current entries. Each entry's age is
// judged against the server timestamp of our own heartbeat, so clocks
// need not agree.
func (t *Tracker) sync(ctx context.Context) (jetstream.KeyWatcher, error) {
	rev, err := t.beat(ctx)
	if err != nil {
		return nil, err
	}
	first, err := t.readBeat(ctx, rev)
	if err != nil {
		return nil, err
	}
	mine := first.Created()
	w, err := t.kv.Watch(ctx, t.cfg.Group+".*")
	if err != nil {
		return nil, fmt.Errorf("presence: watch %s: %w", t.cfg.Group, err)
	}
	replay := map[string]time.Time{}
	for e := range w.Updates() {
		if e == nil {
			break // the current entries are all read
		}
		if e.Operation() == jetstream.KeyValuePut {
			replay[t.idOf(e.Key())] = e.Created()
		}
	}
	now := time.Now()
	seen := map[string]time.Time{t.cfg.Self: now}
	for id, created := range replay {
		if id != t.cfg.Self {
			seen[id] = now.Add(-max(0, mine.Sub(created)))
		}
	}
	t.mu.Lock()
	t.seen = seen
	t.mu.Unlock()
	t.refresh(now)
	return w, nil
}

// readBeatWait bounds readBeat.
const readBeatWait = 15 * time.Second

// readBeat reads back this replica's heartbeat of revision rev. A read
// may be served by a copy of the bucket that has not caught up with the
// write yet (a direct get answered by any replica, on a cluster under load
// or while a node is cut off), so a missing key is read again, with
// backoff, for at most readBeatWait.
func (t *Tracker) readBeat(ctx context.Context, rev uint64) (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, readBeatWait)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		e, err := t.kv.GetRevision(ctx, t.key(), rev)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("presence: read heartbeat %s: %w", t.key(), err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("presence: read heartbeat %s (revision %d): %w", t.key(), rev, errors.Join(err, ctx.Err()))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// loop follows the watch and beats every interval until ctx ends. A watch
// that ends underneath (it should not) is started again at the next beat.
func (t *Tracker) loop(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	updates := w.Updates()
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	var reconnected chan nats.Status
	if t.cfg.Conn != nil {
		reconnected = t.cfg.Conn.StatusChanged(nats.CONNECTED)
		defer t.cfg.Conn.RemoveStatusListener(reconnected)
	}
	for {
		select {
		case <-reconnected:
			// Read the group again at the next beat (sync beats first).
			if w != nil {
				_ = w.Stop()
			}
			w, updates = nil, nil
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := t.kv.Delete(leave, t.key()); err != nil {
				t.log.Warn("cannot remove this replica from the presence bucket; the others will notice when its heartbeats stop", "group", t.cfg.Group, "error", err)
			}
			cancel()
			return
		case e, ok := <-updates:
			switch {
			case !ok:
				if ctx.Err() == nil {
					t.log.Warn("the presence watch ended; watching again at the next heartbeat", "group", t.cfg.Group)
				}
				w, updates = nil, nil
			case e != nil:
				t.apply(e)
			}
		case <-tick.C:
			if w == nil {
				var err error
				if w, err = t.sync(ctx); err != nil {
					if ctx.Err() == nil {
						t.log.Warn("cannot watch the presence bucket", "group", t.cfg.Group, "error", err)
					}
					continue
				}
				updates = w.Updates()
				t.log.Info("watching the replicas again", "group", t.cfg.Group, "live", t.Live())
				continue
			}
			// Expiries first: a heartbeat that cannot be written (the
			// bucket's leader is being elected again, this replica is cut
			// off) must not keep replicas that stopped beating live.
			t.refresh(time.Now())
			bctx, cancel := context.WithTimeout(ctx, t.cfg.Interval)
			_, err := t.beat(bctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				t.log.Warn("presence heartbeat failed", "group", t.cfg.Group, "error", err)
			}
			t.refresh(time.Now())
		}
	}
}

// apply records a heartbeat or a departure.
func (t *Tracker) apply(e jetstream.KeyValueEntry) {
	id := t.idOf(e.Key())
	t.mu.Lock()
	if e.Operation() == jetstream.KeyValuePut {
		t.seen[id] = time.Now()
	} else if id != t.cfg.Self {
		delete(t.seen, id)
	}
	t.mu.Unlock()
	t.refresh(time.Now())
}

// Gone drops replica id from the live set at once, as a caller that found
// it not answering (a request to it had no responders) knows before its
// heartbeats expire. A later heartbeat of id brings it back, so a replica
// that was only unreachable for a moment rejoins by itself. Self is never
// dropped.
func (t *Tracker) Gone(id string) {
	t.mu.Lock()
	if id != t.cfg.Self {
		delete(t.seen, id)
	}
	t.mu.Unlock()
	t.refresh(time.Now())
}

// GoneCh returns a channel closed once replica id is no longer live (its
// heartbeats expired, it left, or Gone dropped it): at once when it is not
// live now. A caller waiting on a request to id selects on it, so a replica
// that died with the request never makes it wait for its whole deadline.
// Every caller asking about one live id shares one channel, so waiting
// costs nothing per request.
func (t *Tracker) GoneCh(id string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !slices.Contains(t.live, id) {
		return closedCh
	}
	ch, ok := t.goneWait[id]
	if !ok {
		if t.goneWait == nil {
			t.goneWait = map[string]chan struct{}{}
		}
		ch = make(chan struct{})
		t.goneWait[id] = ch
	}
	return ch
}

// closedCh is the channel GoneCh returns for a replica that is not live.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// beat puts this replica's heartbeat and returns its revision.
func (t *Tracker) beat(ctx context.Context) (uint64, error) {
	rev, err := t.kv.PutString(ctx, t.key(), time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return 0, fmt.Errorf("presence: heartbeat %s: %w", t.key(), err)
	}
	return rev, nil
}

// refresh recomputes the live set and tells the subscribers when it
// changed. Self is always live.
func (t *Tracker) refresh(now time.Time) {
	t.mu.Lock()
	live := []string{t.cfg.Self}
	for id, at := range t.seen {
		if id != t.cfg.Self && now.Sub(at) < t.cfg.Expire {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	changed := !slices.Equal(live, t.live)
	t.live = live
	for id, ch := range t.goneWait {
		if !slices.Contains(live, id) {
			close(ch)
			delete(t.goneWait, id)
		}
	}
	t.mu.Unlock()
	if changed {
		t.log.Info("replicas changed", "group", t.cfg.Group, "live", live)
		for _, fn := range t.onChange {
			fn()
		}
	}
}

func (t *Tracker) key() string { return t.cfg.Group + "." + t.cfg.Self }

func (t *Tracker) idOf(key string) string { return key[len(t.cfg.Group)+1:] }

// Live returns the ids of the live replicas, sorted, self included.
func (t *Tracker) Live() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.live)
}

// Owner returns the live replica that owns key.
func (t *Tracker) Owner(key string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.live) == 1 {
		return t.live[0]
	}
	return Owner(t.live, key)
}

// Self is this replica's id.
func (t *Tracker) Self() string { return t.cfg.Self }

// Owner picks key's owner among replicas by rendezvous hashing: the
// replica with the highest hash of (replica, key). Every caller with the
// same replicas picks the same one; "" when there are none.
func Owner(replicas []string, key string) string {
	var (
		best      string
		bestScore uint64
	)
	for _, r := range replicas {
		h := fnv.New64a()
		_, _ = h.Write([]byte(r))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(key))
		if s := mix(h.Sum64()); best == "" || s > bestScore || (s == bestScore && r > best) {
			best, bestScore = r, s
		}
	}
	return best
}

// mix is MurmurHash3's 64-bit finalizer: FNV alone leaves the high bits
// of similar inputs correlated, which would skew the owners.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
