package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Filter selects records: Kind ("call", "config", "reply_dropped" or ""
// for all), User and
// Tool ("" for any; Tool implies call records), the newest Limit of them
// (default 100, at most MaxLimit), from Since on (zero: the whole stream).
type Filter struct {
	Kind  string
	User  string
	Tool  string
	Limit int
	Since time.Time
}

// MaxLimit bounds Filter.Limit.
const MaxLimit = 1000

func (f Filter) normalized() Filter {
	if f.Tool != "" {
		f.Kind = KindCall
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, MaxLimit)
	return f
}

// Read returns the newest records matching f, oldest first. The filter is
// applied by the server (the subjects carry the user and tool), so only
// matching records cross the network; without Since every matching record
// of the stream is read once to find the newest.
func Read(ctx context.Context, js jetstream.JetStream, n bus.Names, f Filter) ([]Record, error) {
	var out []Record
	err := scan(ctx, js, n, f, false, func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// Follow calls fn with the newest records matching f (as Read) and then with
// every new one as it is written, until ctx ends or fn fails.
func Follow(ctx context.Context, js jetstream.JetStream, n bus.Names, f Filter, fn func(Record) error) error {
	return scan(ctx, js, n, f, true, fn)
}

func scan(ctx context.Context, js jetstream.JetStream, n bus.Names, f Filter, follow bool, fn func(Record) error) error {
	f = f.normalized()
	cons, pending, err := open(ctx, js, n, f, follow)
	if err != nil || cons == nil {
		return err
	}
	// History: the last Limit records of the backlog.
	ring := make([]Record, 0, f.Limit)
	if err := backlog(ctx, cons, n, pending, func(r Record) {
		if len(ring) == f.Limit {
			copy(ring, ring[1:])
			ring = ring[:len(ring)-1]
		}
		ring = append(ring, r)
	}); err != nil {
		return err
	}
	for _, r := range ring {
		if err := fn(r); err != nil {
			return err
		}
	}
	if !follow {
		return nil
	}
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("audit stream %s: read: %w", n.AuditStream(), err)
		}
		var r Record
		if json.Unmarshal(msg.Data(), &r) != nil {
			continue
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// open makes an ordered consumer of the records matching f (from f.Since
// on) and returns it with the number of records already there. Without
// the stream it returns no consumer, or an error when follow needs one.
func open(ctx context.Context, js jetstream.JetStream, n bus.Names, f Filter, follow bool) (jetstream.Consumer, uint64, error) {
	stream, err := js.Stream(ctx, n.AuditStream())
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			if follow {
				return nil, 0, fmt.Errorf("audit stream %s does not exist yet (is audit.enabled on?)", n.AuditStream())
			}
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("audit stream %s: %w", n.AuditStream(), err)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: n.AuditFilter(f.Kind, f.User, f.Tool)}
	if !f.Since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &f.Since
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("audit stream %s: consumer: %w", n.AuditStream(), err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("audit stream %s: consumer: %w", n.AuditStream(), err)
	}
	return cons, info.NumPending, nil
}

// backlog reads the pending records of cons, in order, calling fn with
// each.
func backlog(ctx context.Context, cons jetstream.Consumer, n bus.Names, pending uint64, fn func(Record)) error {
	for pending > 0 {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return fmt.Errorf("audit stream %s: read: %w", n.AuditStream(), err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("audit stream %s: read: %w", n.AuditStream(), err)
		}
		pending = md.NumPending
		var r Record
		if json.Unmarshal(msg.Data(), &r) != nil {
			continue
		}
		fn(r)
	}
	return nil
}

// Minute is the tool calls of one minute: how many, and how many of them
// failed (any outcome but "ok", tool errors included).
type Minute struct {
	Start  time.Time `json:"start"`
	Calls  int       `json:"calls"`
	Errors int       `json:"errors"`
}

// PerMinute counts the call records of the minutes minutes up to and
// including the one of now, oldest first (user "" for every user). The
// audit stream holds every replica's records, so the counts are the
// deployment's.
func PerMinute(ctx context.Context, js jetstream.JetStream, n bus.Names, user string, now time.Time, minutes int) ([]Minute, error) {
	first := now.UTC().Truncate(time.Minute).Add(-time.Duration(minutes-1) * time.Minute)
	out := make([]Minute, minutes)
	for i := range out {
		out[i].Start = first.Add(time.Duration(i) * time.Minute)
	}
	cons, pending, err := open(ctx, js, n, Filter{Kind: KindCall, User: user, Since: first}, false)
	if err != nil || cons == nil {
		return out, err
	}
	err = backlog(ctx, cons, n, pending, func(r Record) {
		i := int(r.Time.Sub(first) / time.Minute)
		if r.Time.Before(first) || i >= minutes {
			return
		}
		out[i].Calls++
		if r.Outcome != "ok" {
			out[i].Errors++
		}
	})
	return out, err
}
