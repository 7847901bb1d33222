package taskpoller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// writeTimeout bounds one store write made after a remote call; it runs
// even while the service stops, so a finished call is not lost.
const writeTimeout = 10 * time.Second

// PassStats counts what one pass did.
type PassStats struct {
	Cancels, Polls, Notifications int // rows claimed by each step
	Fenced                        int // results discarded: the lease was lost
	Published                     int // events acknowledged by JetStream
	// ClaimTime is the database time spent claiming, WriteTime writing
	// results (both summed over the pass).
	ClaimTime, WriteTime time.Duration
	// DueDelay holds, per polled row, the time from its next_poll_at to the
	// start of its status call.
	DueDelay []time.Duration
}

// poller runs the passes of one replica.
type poller struct {
	s     *Service
	nc    *nats.Conn
	tasks store.TaskPollStore
	cfg   Config
	owner string
	clock func() time.Time
	// stop, once closed, ends the claims (the first phase of a stop): the
	// pass in flight finishes its claimed rows under run's ctx.
	stop <-chan struct{}
	// counted is when refreshCounts last ran (only run's goroutine uses it).
	counted time.Time
}

func newPoller(s *Service) *poller {
	return &poller{s: s, nc: s.deps.NC, tasks: s.deps.Tasks, cfg: s.cfg, owner: s.cfg.LeaseOwner, clock: s.deps.Clock}
}

// stopping reports whether claims have ended.
func (p *poller) stopping() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// run makes a pass at once and then every poll interval, or immediately
// again when a step claimed a full batch (more rows are due), until ctx is
// cancelled.
func (p *poller) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-timer.C:
		}
		busy := p.pass(ctx)
		if busy {
			timer.Reset(0)
		} else {
			timer.Reset(p.cfg.Tasks.PollInterval)
		}
	}
}

// pass runs the three steps in order: cancels, polls, notifications. It
// reports whether a step claimed a full batch.
func (p *poller) pass(ctx context.Context) bool {
	st := &passStats{}
	limit := p.cfg.MaxConcurrentPolls
	st.Cancels = p.step(ctx, st, "claim due cancels", p.tasks.ClaimDueCancels, p.cancel)
	st.Polls = p.step(ctx, st, "claim due polls", p.tasks.ClaimDuePolls, p.poll)
	st.Notifications = p.step(ctx, st, "claim due notifications", p.tasks.ClaimDueNotifications, p.notify)
	p.refreshCounts(ctx)
	if p.s.deps.OnPass != nil {
		p.s.deps.OnPass(st.snapshot())
	}
	return st.Cancels == limit || st.Polls == limit || st.Notifications == limit
}

// step claims up to MaxConcurrentPolls rows and handles them concurrently,
// returning how many it claimed. An error with one row affects only that
// row: its lease expires and another pass retries it.
func (p *poller) step(ctx context.Context, st *passStats, what string,
	claim func(context.Context, store.ClaimParams) ([]store.Task, error),
	handle func(context.Context, *passStats, store.Task)) int {
	if ctx.Err() != nil || p.stopping() {
		return 0
	}
	start := time.Now()
	rows, err := claim(ctx, store.ClaimParams{Namespace: p.s.deps.Names.Namespace(), Owner: p.owner, Lease: p.cfg.Lease, Limit: p.cfg.MaxConcurrentPolls})
	st.addClaim(time.Since(start))
	if err != nil {
		if ctx.Err() == nil {
			p.s.log.Warn("claim failed", "step", what, observability.Err(err))
		}
		return 0
	}
	// The lease runs from the database's clock at the claim, no earlier
	// than start here: the calls under it end by start + lease, less a
	// margin (callTimeout).
	hctx := p.withLeaseEnd(ctx, start)
	var wg sync.WaitGroup
	for _, row := range rows {
		wg.Go(func() { handle(hctx, st, row) })
	}
	wg.Wait()
	return len(rows)
}

// updateTask writes a result under the poll/cancel lease and reports
// whether it was stored.
func (p *poller) updateTask(ctx context.Context, st *passStats, id string, fn func(*store.Task)) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	start := time.Now()
	err := p.tasks.UpdateTaskUnderLease(wctx, store.UpdateUnderLeaseParams{ID: id, Owner: p.owner, Update: fn})
	st.addWrite(time.Since(start))
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		st.fenced.Add(1)
		p.s.log.InfoContext(ctx, "result discarded: lease lost", "task_id", id)
	case err != nil:
		p.s.log.WarnContext(ctx, "cannot store task result", "task_id", id, observability.Err(err))
	}
	return err == nil
}

// releaseLease gives a row back without recording anything (the service is
// stopping and its call was cancelled), so another replica takes it at once.
func (p *poller) releaseLease(ctx context.Context, st *passStats, id string) {
	p.updateTask(ctx, st, id, func(t *store.Task) {
		t.LeaseOwner, t.LeaseExpiresAt = "", nil
	})
}

// settings are the state machine's knobs.
func (p *poller) settings() tasks.Settings { return p.cfg.Tasks }

// passStats accumulates one pass's counts from concurrent handlers.
type passStats struct {
	PassStats
	mu        sync.Mutex
	fenced    atomic.Int64
	published atomic.Int64
}

func (s *passStats) addClaim(d time.Duration) {
	s.mu.Lock()
	s.ClaimTime += d
	s.mu.Unlock()
}

func (s *passStats) addWrite(d time.Duration) {
	s.mu.Lock()
	s.WriteTime += d
	s.mu.Unlock()
}

func (s *passStats) addDueDelay(d time.Duration) {
	s.mu.Lock()
	s.DueDelay = append(s.DueDelay, d)
	s.mu.Unlock()
}

func (s *passStats) snapshot() PassStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.PassStats
	out.Fenced = int(s.fenced.Load())
	out.Published = int(s.published.Load())
	return out
}
