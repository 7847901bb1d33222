package toolcall

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
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
// its owner's calls) across the replicas. A refusal is counted in
// mcpbus_toolcall_rate_limited_total and noted for the audit record's
// policy (note).
func (s *Service) admitServerQuotas(ctx context.Context, t target, note *callNote) (func(), error) {
	subject := t.srv.Name
	if t.personal() {
		subject = t.owner + "\x00" + subject
	}
	ls := make([]limit, 0, len(t.srv.Quotas))
	for i, q := range t.srv.Quotas {
		ls = append(ls, limit{Quota: q, label: fmt.Sprintf("mcpServers.%s.quotas[%d]", t.srv.Name, i),
			group: quota.ServerGroup(t.srv.Name, i), subject: subject})
	}
	release, err := s.admitLimits(ctx, fmt.Sprintf("server '%s'", t.srv.Name), ls)
	if be := bus.AsError(err); be != nil && be.Code == bus.CodeRateLimited {
		s.metrics.RateLimited.WithLabelValues(limitUpstreamQuota).Inc()
		note.policy, _ = be.Details["policy"].(string)
	}
	return release, err
}

// limit is one quota as the call path counts it: its name in errors and
// audit (label), its counters' group and the call's subject there.
type limit struct {
	config.Quota
	label, group, subject string
}

// admitLimits takes the call from every limit: first a slot of each
// concurrent limit, then each calls-per-window limit, so that a call
// refused for calls in flight is not counted in a window. what names the
// limited thing in errors ("server 'web'"). A refusal is rate_limited
// naming the limit (details: policy, limit, retry_after_seconds — the
// window's end, or 1 s for calls in flight, which may end any time); the
// slots already taken are freed. The returned release frees the call's
// slots.
func (s *Service) admitLimits(ctx context.Context, what string, ls []limit) (func(), error) {
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	fail := func(err error) (func(), error) {
		release()
		if be := (*bus.Error)(nil); !errors.As(err, &be) {
			err = bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("the quota of %s cannot be counted right now; retry shortly", what))
		}
		return nil, err
	}
	for _, l := range ls {
		if l.Concurrent <= 0 {
			continue
		}
		r, err := s.holdSlot(ctx, l.group, l.subject, l.Concurrent)
		if err != nil {
			return fail(err)
		}
		if r == nil {
			return fail(&bus.Error{Code: bus.CodeRateLimited,
				Message: fmt.Sprintf("quota reached: %s allows %d calls in flight (%s); retry when one has ended", what, l.Concurrent, l.label),
				Details: map[string]any{"policy": l.label, "limit": l.label, "concurrent": l.Concurrent, "retry_after_seconds": 1}})
		}
		releases = append(releases, r)
	}
	for _, l := range ls {
		if l.Calls <= 0 {
			continue
		}
		counter, err := s.quotaCounter(ctx)
		if err != nil {
			return fail(err)
		}
		d, err := counter.TakeIn(ctx, l.group, l.subject, l.Calls, time.Duration(l.IntervalSeconds)*time.Second)
		if err != nil {
			return fail(err)
		}
		if !d.Allowed {
			retry := max(1, int(math.Ceil(d.RetryAfter.Seconds())))
			return fail(&bus.Error{Code: bus.CodeRateLimited,
				Message: fmt.Sprintf("quota reached: %s allows %d calls per %d seconds (%s); retry in %d seconds", what, l.Calls, l.IntervalSeconds, l.label, retry),
				Details: map[string]any{"policy": l.label, "limit": l.label, "calls": l.Calls, "interval_seconds": l.IntervalSeconds, "retry_after_seconds": retry}})
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
