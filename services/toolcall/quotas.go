package toolcall

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/quota"
)

// Quotas held across every toolcall replica in the quota bucket
// (pkg/quota): calls per window (Counter.TakeIn) and calls in flight
// (Counter.Acquire, a semaphore whose slot this replica renews while the
// call runs and frees when it ends). A virtual server's quotas are counted
// per caller × set × tool (virtual.go); a server's own quotas
// (mcpServers.<name>.quotas) over every caller of the server (below).
// Calls under no quota touch the bucket not at all.

// limitUpstreamQuota labels refusals by a server's own quotas in
// mcpbus_toolcall_rate_limited_total.
const limitUpstreamQuota = "upstream_quota"

// slotLease is how long a call's slot holds without a renewal: a replica
// that dies mid-call frees its slots this long after its last renewal.
const slotLease = quota.DefaultLease

// holdSlot takes a slot for the call in subject's semaphore under group
// when fewer than limit calls hold it, and keeps it renewed until the
// returned release runs; nil (and no error) when the semaphore is full.
func (s *Service) holdSlot(ctx context.Context, group, subject string, limit int) (func(), error) {
	counter, err := s.quotaCounter(ctx)
	if err != nil {
		return nil, err
	}
	slot, d, err := counter.Acquire(ctx, group, subject, s.deps.ReplicaID, limit, slotLease)
	if err != nil {
		return nil, err
	}
	if !d.Allowed {
		return nil, nil
	}
	stop := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(slotLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rctx, cancel := context.WithTimeout(context.Background(), slotLease/3)
				err := slot.Renew(rctx, slotLease)
				cancel()
				if errors.Is(err, quota.ErrSlotLost) {
					s.log.Warn("a call's quota slot expired before its renewal; the call runs on outside the count", "group", group)
					return
				} else if err != nil {
					s.log.Warn("cannot renew a call's quota slot", observability.Err(err))
				}
			}
		}
	}()
	return func() {
		close(stop)
		<-ended
		// The caller's context may be done (a cancelled call): free the
		// slot anyway; if this fails, the slot expires after its lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := slot.Release(rctx); err != nil {
			s.log.Warn("cannot free a call's quota slot; it expires after its lease", observability.Err(err), "lease", slotLease.String())
		}
	}, nil
}

// admitServerQuotas takes the call from every quota of t's server
// (mcpServers.<name>.quotas): calls per window and calls in flight,
// counted over every caller of the server (of a personal connection, over
// its owner's calls) across the replicas. A refusal is rate_limited naming
// the quota, counted in mcpbus_toolcall_rate_limited_total and noted for
// the audit record's policy.
func (s *Service) admitServerQuotas(ctx context.Context, t target) (func(), error) {
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	subject := t.srv.Name
	if t.personal() {
		subject = t.owner + "\x00" + subject
	}
	for i, q := range t.srv.Quotas {
		label := fmt.Sprintf("mcpServers.%s.quotas[%d]", t.srv.Name, i)
		group := quota.ServerGroup(t.srv.Name, i)
		var refusal *bus.Error
		if q.Calls > 0 {
			counter, err := s.quotaCounter(ctx)
			if err != nil {
				release()
				return nil, err
			}
			d, err := counter.TakeIn(ctx, group, subject, q.Calls, time.Duration(q.IntervalSeconds)*time.Second)
			if err != nil {
				release()
				return nil, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("the quota of server '%s' cannot be counted right now; retry shortly", t.srv.Name))
			}
			if !d.Allowed {
				retry := max(1, int(math.Ceil(d.RetryAfter.Seconds())))
				refusal = &bus.Error{Code: bus.CodeRateLimited,
					Message: fmt.Sprintf("quota reached: server '%s' allows %d calls per %d seconds (%s); retry in %d seconds",
						t.srv.Name, q.Calls, q.IntervalSeconds, label, retry),
					Details: map[string]any{"policy": label, "limit": label, "calls": q.Calls, "interval_seconds": q.IntervalSeconds, "retry_after_seconds": retry}}
			}
		}
		if refusal == nil && q.Concurrent > 0 {
			r, err := s.holdSlot(ctx, group, subject, q.Concurrent)
			if err != nil {
				release()
				return nil, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("the quota of server '%s' cannot be counted right now; retry shortly", t.srv.Name))
			}
			if r == nil {
				refusal = &bus.Error{Code: bus.CodeRateLimited,
					Message: fmt.Sprintf("quota reached: server '%s' allows %d calls in flight (%s); retry when one has ended",
						t.srv.Name, q.Concurrent, label),
					Details: map[string]any{"policy": label, "limit": label, "concurrent": q.Concurrent, "retry_after_seconds": 1}}
			} else {
				releases = append(releases, r)
			}
		}
		if refusal != nil {
			release()
			s.metrics.RateLimited.WithLabelValues(limitUpstreamQuota).Inc()
			if n, ok := ctx.Value(callNoteKey{}).(*callNote); ok {
				n.policy = label
			}
			return nil, refusal
		}
	}
	return release, nil
}

// quotaCounter opens the quota bucket on first use (a deployment without
// quotas never creates it); a failure is retried on the next call.
func (s *Service) quotaCounter(ctx context.Context) (*quota.Counter, error) {
	v := s.virtual
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.counter != nil {
		return v.counter, nil
	}
	js, err := jetstream.New(s.deps.NC)
	if err != nil {
		return nil, bus.Wrap(bus.CodeUnavailable, err, "the quota bucket cannot be opened")
	}
	kv, err := bus.QuotasKV(ctx, js, s.deps.Names, 0)
	if err != nil {
		s.log.Warn("cannot open the quota bucket", observability.Err(err))
		return nil, bus.Wrap(bus.CodeUnavailable, err, "the quota bucket cannot be opened; retry shortly")
	}
	v.counter = quota.New(kv, v.now)
	return v.counter, nil
}
