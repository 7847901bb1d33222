package taskpoller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

// benchTasks is the number of active tasks of BenchmarkPollers.
const benchTasks = 10000

// BenchmarkPollers polls 10,000 due tasks once each (the status tool answers
// "running" at once, and the next poll is an hour away) with 1 and 3 poller
// replicas on SQLite and PostgreSQL, and reports status calls per second,
// the p99 delay between a task falling due and its status call, and the
// database time (claims plus result writes) per poll.
func BenchmarkPollers(b *testing.B) {
	for _, backend := range backendsUnderTest {
		for _, replicas := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/replicas=%d", backend, replicas), func(b *testing.B) {
				benchmarkPollers(b, backend, replicas)
			})
		}
	}
}

func benchmarkPollers(b *testing.B, backend string, replicas int) {
	bs := testkit.StartBus(b)
	st := openStore(b, backend)
	ts := submitter{st.Tasks(), bs.Names.Namespace()}
	responder := bs.Connect(b)
	sub, err := responder.Subscribe(bs.Names.InternalCall(), func(m *nats.Msg) {
		var req bus.InternalCallRequest
		_ = json.Unmarshal(m.Data, &req)
		var args map[string]string
		_ = json.Unmarshal(req.Arguments, &args)
		body, _ := json.Marshal(bus.InternalCallReply{StructuredContent: mustJSON(map[string]string{"task_id": args["task_id"], "status": "running"})})
		_ = m.Respond(body)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := responder.Flush(); err != nil {
		b.Fatal(err)
	}

	var (
		calls, claimNS, writeNS int64
		delays                  []time.Duration
	)
	for i := range b.N {
		b.StopTimer()
		insertBenchTasks(b, ts, i, backend == store.BackendPostgres)
		var (
			mu     sync.Mutex
			done   = make(chan struct{})
			seen   int
			closed bool
		)
		onPass := func(p taskpoller.PassStats) {
			mu.Lock()
			defer mu.Unlock()
			seen += p.Polls
			claimNS += int64(p.ClaimTime)
			writeNS += int64(p.WriteTime)
			delays = append(delays, p.DueDelay...)
			if seen >= benchTasks && !closed {
				closed = true
				close(done)
			}
		}
		cfg := taskpoller.Config{Enabled: true, MaxConcurrentPolls: 64, Lease: time.Minute, StopTimeout: 5 * time.Second,
			Tasks: tasks.Settings{PollInterval: time.Hour, MaxPollBackoff: time.Hour, InputRequiredPollInterval: time.Hour,
				TrackingDegradedAfterErrors: 3, MaxResultBytes: 65536, ResultPreviewMaxChars: 2000}}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		b.StartTimer()
		for range replicas {
			svc, err := taskpoller.New(cfg, taskpoller.Deps{NC: bs.Connect(b), Names: bs.Names, Store: st, Tasks: ts, Events: bs.JS, OnPass: onPass})
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() { _ = svc.Run(ctx) })
		}
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatal("10,000 tasks were not polled within 5 minutes")
		}
		b.StopTimer()
		calls += benchTasks
		cancel()
		wg.Wait()
		b.StartTimer()
	}
	elapsed := b.Elapsed()
	slices.Sort(delays)
	b.ReportMetric(float64(calls)/elapsed.Seconds(), "status_calls/s")
	if len(delays) > 0 {
		b.ReportMetric(float64(delays[len(delays)*99/100].Milliseconds()), "p99_due_delay_ms")
	}
	b.ReportMetric(float64(claimNS+writeNS)/float64(calls)/1e3, "db_us/poll")
}

// insertBenchTasks stores benchTasks due tasks (PostgreSQL concurrently).
func insertBenchTasks(b *testing.B, ts store.TaskSubmitStore, round int, concurrent bool) {
	b.Helper()
	workers := 1
	if concurrent {
		workers = 8
	}
	dd := tasks.DriverData{StatusTool: "status", CancelTool: "cancel"}.Marshal()
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < benchTasks; i += workers {
				row := &store.Task{UserID: "u", ThreadID: "th", ServerName: "bench", DriverName: tasks.DriverStructured,
					RemoteTaskID: fmt.Sprintf("r%d-%d", round, i), TaskName: "bench", DriverData: dd, NextPollAt: &now}
				if err := insertRow(ts, row); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
