// Package quota counts calls across every replica in a NATS JetStream
// key-value bucket (bus.QuotasKV): calls per fixed window (Counter.TakeIn:
// one key per (subject, window), incremented with compare-and-set, so two
// replicas never both take the last call of a window; a key outlives its
// window by the bucket's TTL only, nothing needs cleaning) and calls in
// flight (Counter.Acquire, semaphore.go: one key per subject holding its
// calls with their expiries).
//
// Why NATS KV and not PostgreSQL: the bus is there in every deployment
// (the memory database backend included, and mcpbus dev), a counter is
// one small message, and the compare-and-set on a key's revision is the
// atomic increment the limit needs.
package quota

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// maxAttempts bounds the compare-and-set retries of one Take under
// contention.
const maxAttempts = 16

// Counter takes calls from windows kept in a KV bucket. Safe for
// concurrent use.
type Counter struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// New returns a Counter over kv; now is the clock (nil: time.Now).
func New(kv jetstream.KeyValue, now func() time.Time) *Counter {
	if now == nil {
		now = time.Now
	}
	return &Counter{kv: kv, now: now}
}

// Decision is the outcome of Take.
type Decision struct {
	// Allowed says the call was counted.
	Allowed bool
	// Used is the window's count after the take (Limit when refused).
	Used int
	// RetryAfter is how long until the window ends (refused calls).
	RetryAfter time.Duration
}

// Take counts one call under subject in the current window of interval
// when fewer than limit were counted there, and refuses it otherwise.
// subject is any string (it is hashed into the key).
func (c *Counter) Take(ctx context.Context, subject string, limit int, interval time.Duration) (Decision, error) {
	return c.TakeIn(ctx, "", subject, limit, interval)
}

// TakeIn is Take with the key under group (KV key tokens: letters,
// digits, '-' and '_', dot-separated; "" for none), so Usage can sum a
// group's current window.
func (c *Counter) TakeIn(ctx context.Context, group, subject string, limit int, interval time.Duration) (Decision, error) {
	if interval < time.Second {
		return Decision{}, fmt.Errorf("quota: interval %s is shorter than a second", interval)
	}
	now := c.now()
	key, end := windowKey(group, subject, interval, now)
	for range maxAttempts {
		e, err := c.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if limit < 1 {
				return Decision{Used: limit, RetryAfter: end.Sub(now)}, nil
			}
			if _, err := c.kv.Create(ctx, key, []byte("1")); err == nil {
				return Decision{Allowed: true, Used: 1}, nil
			} else if !conflict(err) {
				return Decision{}, fmt.Errorf("quota: create %s: %w", key, err)
			}
		case err != nil:
			return Decision{}, fmt.Errorf("quota: read %s: %w", key, err)
		default:
			n, _ := strconv.Atoi(string(e.Value()))
			if n >= limit {
				return Decision{Used: n, RetryAfter: end.Sub(now)}, nil
			}
			if _, err := c.kv.Update(ctx, key, []byte(strconv.Itoa(n+1)), e.Revision()); err == nil {
				return Decision{Allowed: true, Used: n + 1}, nil
			} else if !conflict(err) {
				return Decision{}, fmt.Errorf("quota: update %s: %w", key, err)
			}
		}
		// Another replica counted first: read again.
	}
	return Decision{}, fmt.Errorf("quota: %s: too much contention", key)
}

// Peek says whether Take would count a call under subject now, without
// counting one: Allowed, or the window's Used and RetryAfter.
func (c *Counter) Peek(ctx context.Context, subject string, limit int, interval time.Duration) (Decision, error) {
	if interval < time.Second {
		return Decision{}, fmt.Errorf("quota: interval %s is shorter than a second", interval)
	}
	now := c.now()
	key, end := windowKey("", subject, interval, now)
	n := 0
	e, err := c.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return Decision{}, fmt.Errorf("quota: read %s: %w", key, err)
	default:
		n, _ = strconv.Atoi(string(e.Value()))
	}
	if n >= limit {
		return Decision{Used: n, RetryAfter: end.Sub(now)}, nil
	}
	return Decision{Allowed: true, Used: n}, nil
}

// windowKey is the bucket key of subject's window of interval at now
// under group (TakeIn), and the window's end.
func windowKey(group, subject string, interval time.Duration, now time.Time) (string, time.Time) {
	secs, window, end := windowOf(now, interval)
	sum := sha256.Sum256([]byte(subject))
	return "w." + groupPrefix(group) + hex.EncodeToString(sum[:16]) + "." + strconv.FormatInt(secs, 10) + "." + strconv.FormatInt(window, 10), end
}

// conflict reports a compare-and-set that lost to another writer (the
// codes differ between replicated and single-server buckets).
func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// windowOf is the window of interval holding now: its length in seconds,
// its number since the Unix epoch and its end.
func windowOf(now time.Time, interval time.Duration) (secs, window int64, end time.Time) {
	secs = int64(interval / time.Second)
	window = now.Unix() / secs
	return secs, window, time.Unix((window+1)*secs, 0)
}

func groupPrefix(group string) string {
	if group == "" {
		return ""
	}
	return "g." + group + "."
}

// Usage is what a group counts in the current window of interval.
type Usage struct {
	// Subjects is how many subjects (callers × tools) took calls.
	Subjects int `json:"subjects"`
	// Calls is the calls counted, every subject together.
	Calls int `json:"calls"`
	// WindowEnd is when the window ends and the counts start again.
	WindowEnd time.Time `json:"window_end"`
}

// ReadUsage sums the current window of interval of group (TakeIn) in kv,
// read now (nil: time.Now). A nil kv (no bucket yet) has counted nothing.
func ReadUsage(ctx context.Context, kv jetstream.KeyValue, group string, interval time.Duration, now func() time.Time) (Usage, error) {
	if now == nil {
		now = time.Now
	}
	if interval < time.Second || group == "" {
		return Usage{}, fmt.Errorf("quota: usage needs a group and an interval of a second or more")
	}
	secs, window, end := windowOf(now(), interval)
	u := Usage{WindowEnd: end.UTC()}
	if kv == nil {
		return u, nil
	}
	lister, err := kv.ListKeysFiltered(ctx, "w."+groupPrefix(group)+"*."+strconv.FormatInt(secs, 10)+"."+strconv.FormatInt(window, 10))
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return u, nil
	}
	if err != nil {
		return Usage{}, fmt.Errorf("quota: list %s: %w", group, err)
	}
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return Usage{}, fmt.Errorf("quota: read %s: %w", key, err)
		}
		n, _ := strconv.Atoi(string(e.Value()))
		u.Subjects++
		u.Calls += n
	}
	return u, nil
}
