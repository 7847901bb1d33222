package quota

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The semaphore: calls in flight under one subject, counted across every
// replica. Its key ("s.<group>.<hash>") holds the calls in flight as a
// JSON list of holders, each with the replica that runs the call and an
// expiry. A replica adds its call with compare-and-set when fewer than the
// limit are unexpired, renews the expiry while the call runs (Slot.Renew,
// every lease/3 in toolcall) and removes it when the call ends. A replica
// that dies mid-call stops renewing: its entry expires one lease later and
// the next acquire prunes it, so no slot is held forever. Entries expire
// by their own stamp, read against the acquiring replica's clock; no
// per-message TTL is needed (NATS 2.9 has none).

// DefaultLease is how long an entry holds its slot without a renewal.
const DefaultLease = 30 * time.Second

// holder is one call in flight.
type holder struct {
	ID      string `json:"id"`
	Replica string `json:"replica,omitempty"`
	// Expires is the entry's expiry in Unix milliseconds.
	Expires int64 `json:"exp"`
}

// Slot is a call's place in a semaphore, from Acquire.
type Slot struct {
	c   *Counter
	key string
	id  string
}

// Acquire adds a call in flight under subject (in group, as TakeIn) when
// fewer than limit unexpired calls hold the key, with an expiry lease from
// now; replica names the holder (shown by ReadInFlight). Expired entries
// are pruned on the way. A refusal is a Decision with Used (the calls in
// flight) and RetryAfter one second (a call may end at any time).
func (c *Counter) Acquire(ctx context.Context, group, subject, replica string, limit int, lease time.Duration) (*Slot, Decision, error) {
	if lease < time.Second {
		return nil, Decision{}, fmt.Errorf("quota: lease %s is shorter than a second", lease)
	}
	key := semaphoreKey(group, subject)
	id, err := newID()
	if err != nil {
		return nil, Decision{}, err
	}
	var refused Decision
	err = c.update(ctx, key, func(hs []holder, now time.Time) ([]holder, bool) {
		if len(hs) >= limit {
			refused = Decision{Used: len(hs), RetryAfter: time.Second}
			return nil, false
		}
		return append(hs, holder{ID: id, Replica: replica, Expires: now.Add(lease).UnixMilli()}), true
	})
	if err != nil {
		return nil, Decision{}, err
	}
	if refused.RetryAfter > 0 {
		return nil, refused, nil
	}
	return &Slot{c: c, key: key, id: id}, Decision{Allowed: true}, nil
}

// Renew moves the slot's expiry to lease from now. A slot already pruned
// (it expired) is not taken again: ErrSlotLost.
func (s *Slot) Renew(ctx context.Context, lease time.Duration) error {
	lost := false
	err := s.c.update(ctx, s.key, func(hs []holder, now time.Time) ([]holder, bool) {
		i := slices.IndexFunc(hs, func(h holder) bool { return h.ID == s.id })
		if i < 0 {
			lost = true
			return nil, false
		}
		hs[i].Expires = now.Add(lease).UnixMilli()
		return hs, true
	})
	if err == nil && lost {
		return ErrSlotLost
	}
	return err
}

// ErrSlotLost is a renewal of a slot that expired and was pruned.
var ErrSlotLost = errors.New("quota: the slot expired before its renewal")

// Release frees the slot (a slot already pruned is nothing to free).
func (s *Slot) Release(ctx context.Context) error {
	return s.c.update(ctx, s.key, func(hs []holder, _ time.Time) ([]holder, bool) {
		i := slices.IndexFunc(hs, func(h holder) bool { return h.ID == s.id })
		if i < 0 {
			return nil, false
		}
		return slices.Delete(hs, i, i+1), true
	})
}

// update reads key's unexpired holders, applies change and writes its
// result with compare-and-set (retrying when another replica wrote
// first); change returns false to write nothing. Expired holders are
// dropped from what is written.
func (c *Counter) update(ctx context.Context, key string, change func(hs []holder, now time.Time) ([]holder, bool)) error {
	for range maxSemaphoreAttempts {
		now := c.now()
		var hs []holder
		var rev uint64
		e, err := c.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("quota: read %s: %w", key, err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &hs); err != nil {
				hs = nil // a damaged entry holds nothing; rewritten below
			}
		}
		hs = unexpired(hs, now)
		out, write := change(hs, now)
		if !write {
			return nil
		}
		body, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("quota: encode %s: %w", key, err)
		}
		if rev == 0 {
			_, err = c.kv.Create(ctx, key, body)
		} else {
			_, err = c.kv.Update(ctx, key, body, rev)
		}
		if err == nil {
			return nil
		}
		if !conflict(err) {
			return fmt.Errorf("quota: write %s: %w", key, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("quota: %s: %w", key, ctx.Err())
		}
	}
	return fmt.Errorf("quota: %s: too much contention", key)
}

// maxSemaphoreAttempts bounds the compare-and-set retries of one
// semaphore change: every caller of a key may be writing it at once.
const maxSemaphoreAttempts = 64

// unexpired is hs without the holders expired at now.
func unexpired(hs []holder, now time.Time) []holder {
	ms := now.UnixMilli()
	return slices.DeleteFunc(hs, func(h holder) bool { return h.Expires <= ms })
}

// semaphoreKey is the bucket key of subject's semaphore under group.
func semaphoreKey(group, subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return "s." + groupPrefix(group) + hex.EncodeToString(sum[:16])
}

func newID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("quota: slot id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// InFlight is what a group's semaphores hold now.
type InFlight struct {
	// Calls is the unexpired calls in flight, every subject together.
	Calls int `json:"calls"`
	// Replicas is how many replicas run them.
	Replicas int `json:"replicas"`
}

// ReadInFlight sums the unexpired calls in flight of group's semaphores
// (Acquire) in kv, read now (nil: time.Now). A nil kv holds nothing.
func ReadInFlight(ctx context.Context, kv jetstream.KeyValue, group string, now func() time.Time) (InFlight, error) {
	if now == nil {
		now = time.Now
	}
	if group == "" {
		return InFlight{}, fmt.Errorf("quota: calls in flight need a group")
	}
	var out InFlight
	if kv == nil {
		return out, nil
	}
	lister, err := kv.ListKeysFiltered(ctx, "s."+groupPrefix(group)+"*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return out, nil
	}
	if err != nil {
		return InFlight{}, fmt.Errorf("quota: list %s: %w", group, err)
	}
	replicas := map[string]bool{}
	t := now()
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return InFlight{}, fmt.Errorf("quota: read %s: %w", key, err)
		}
		var hs []holder
		if json.Unmarshal(e.Value(), &hs) != nil {
			continue
		}
		for _, h := range unexpired(hs, t) {
			out.Calls++
			replicas[h.Replica] = true
		}
	}
	out.Replicas = len(replicas)
	return out, nil
}

// ServerGroup is the group (TakeIn, Acquire) of quota index of the MCP
// server named server (mcpServers.<name>.quotas): the name is hashed, as
// server names need not be KV key tokens.
func ServerGroup(server string, index int) string {
	sum := sha256.Sum256([]byte(server))
	return "srv-" + hex.EncodeToString(sum[:8]) + "." + strconv.Itoa(index)
}
