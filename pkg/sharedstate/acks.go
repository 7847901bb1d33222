package sharedstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Acknowledgements of the cache generation. A replica whose Watcher acks
// (AckTo) keeps the key "gen.<service>.<replica>" in the presence bucket
// (bus.PresenceKV) holding the generation it has applied: put when it
// starts, whenever it applies a newer generation, and again every
// ackRefresh so the bucket's TTL keeps only live replicas; deleted when its
// watch ends. A cache reset reads these keys to say how many replicas of
// each service have acknowledged the generation it wrote (AwaitAcks).

// ackPrefix starts every acknowledgement key.
const ackPrefix = "gen."

// ackRefresh is how often a replica puts its acknowledgement again (the
// presence bucket drops an entry a minute after its last put).
const ackRefresh = 20 * time.Second

// ackTimeout bounds one put or delete of an acknowledgement.
const ackTimeout = 5 * time.Second

// acker is where and as whom a Watcher acknowledges generations.
type acker struct {
	kv               jetstream.KeyValue
	service, replica string
}

func (a *acker) key() string { return ackPrefix + a.service + "." + a.replica }

// AckTo makes the watcher acknowledge every generation it applies under
// service and replica (KV key tokens: letters, digits, - and _) in kv, the
// presence bucket. Call before Start.
func (w *Watcher) AckTo(kv jetstream.KeyValue, service, replica string) {
	w.ack = &acker{kv: kv, service: service, replica: replica}
}

// putAck writes the generation in force as this replica's acknowledgement.
func (w *Watcher) putAck(ctx context.Context) {
	if w.ack == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	gen := w.Current().Generation
	if _, err := w.ack.kv.PutString(ctx, w.ack.key(), strconv.FormatInt(gen, 10)); err != nil && ctx.Err() == nil {
		w.log.Warn("cannot acknowledge the cache generation", observability.KeyGen, gen, observability.Err(err))
	}
}

// dropAck deletes this replica's acknowledgement (it is leaving).
func (w *Watcher) dropAck() {
	if w.ack == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	_ = w.ack.kv.Delete(ctx, w.ack.key())
}

// AwaitAcks waits until every replica listed in kv (the presence bucket,
// a stream of js) has acknowledged generation gen or a later one, or until
// ctx ends, and returns per service how many replicas are listed and how
// many of them have acknowledged. Only an unreadable bucket is an error; a
// replica that has not acknowledged when ctx ends is counted as such.
//
// The listed keys are read from the bucket's stream (its subjects), not
// from a watch's initial replay, whose end marker can come before every
// key was delivered; a watch of new values only says when to read again.
func AwaitAcks(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, gen int64) (map[string]bus.ReplicaAcks, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kw, err := kv.Watch(wctx, ackPrefix+">", jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("watch generation acknowledgements: %w", err)
	}
	defer func() { _ = kw.Stop() }()
	var seen map[string]int64
	for {
		if seen, err = readAcks(ctx, js, kv); err != nil {
			if ctx.Err() != nil {
				return countAcks(seen, gen), nil
			}
			return nil, err
		}
		if allAcked(seen, gen) {
			return countAcks(seen, gen), nil
		}
		select {
		case <-ctx.Done():
			return countAcks(seen, gen), nil
		case _, ok := <-kw.Updates():
			if !ok {
				return countAcks(seen, gen), errors.New("the watch of generation acknowledgements ended")
			}
		}
	}
}

// readAcks reads every acknowledgement key of kv and its generation.
func readAcks(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (map[string]int64, error) {
	prefix := "$KV." + kv.Bucket() + "."
	stream, err := js.Stream(ctx, "KV_"+kv.Bucket())
	if err != nil {
		return nil, fmt.Errorf("read generation acknowledgements: %w", err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(prefix+ackPrefix+">"))
	if err != nil {
		return nil, fmt.Errorf("read generation acknowledgements: %w", err)
	}
	seen := map[string]int64{}
	for subject := range info.State.Subjects {
		key := strings.TrimPrefix(subject, prefix)
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted: that replica left
		}
		if err != nil {
			return nil, fmt.Errorf("read generation acknowledgement %s: %w", key, err)
		}
		seen[key], _ = strconv.ParseInt(string(e.Value()), 10, 64)
	}
	return seen, nil
}

func allAcked(seen map[string]int64, gen int64) bool {
	for _, g := range seen {
		if g < gen {
			return false
		}
	}
	return true
}

// countAcks groups the acknowledgement keys by service.
func countAcks(seen map[string]int64, gen int64) map[string]bus.ReplicaAcks {
	out := map[string]bus.ReplicaAcks{}
	for key, g := range seen {
		service, _, ok := strings.Cut(strings.TrimPrefix(key, ackPrefix), ".")
		if !ok {
			continue
		}
		a := out[service]
		a.Replicas++
		if g >= gen {
			a.Acknowledged++
		}
		out[service] = a
	}
	return out
}
