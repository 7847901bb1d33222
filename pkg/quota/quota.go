// Package quota counts calls per fixed window across every replica in a
// NATS JetStream key-value bucket (bus.QuotasKV): one key per (subject,
// window), incremented with compare-and-set, so two replicas never both
// take the last call of a window. A key outlives its window by the
// bucket's TTL only; nothing needs cleaning.
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
	if interval < time.Second {
		return Decision{}, fmt.Errorf("quota: interval %s is shorter than a second", interval)
	}
	now := c.now()
	key, end := windowKey(subject, interval, now)
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
	key, end := windowKey(subject, interval, now)
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

// windowKey is the bucket key of subject's window of interval at now, and
// the window's end.
func windowKey(subject string, interval time.Duration, now time.Time) (string, time.Time) {
	secs := int64(interval / time.Second)
	window := now.Unix() / secs
	sum := sha256.Sum256([]byte(subject))
	return "w." + hex.EncodeToString(sum[:16]) + "." + strconv.FormatInt(secs, 10) + "." + strconv.FormatInt(window, 10),
		time.Unix((window+1)*secs, 0)
}

// conflict reports a compare-and-set that lost to another writer (the
// codes differ between replicated and single-server buckets).
func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}
