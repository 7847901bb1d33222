package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Outcome is how one request ended.
type Outcome struct {
	Start time.Time
	Dur   time.Duration
	// Kind is "stdio" or "http" (load calls), "submit" (a task submit) or
	// "fault" (a call of a fault tool).
	Kind string
	// Code is empty for an answer, the error code for a failure, or
	// "hung" for no answer within HungAfter.
	Code string
	// ID is the request id the call carried (Mcpbus-Request-Id), so a hung
	// call can be found in the services' logs; Detail names its tool and
	// thread.
	ID, Detail string
}

// Hung reports whether the request got no answer within HungAfter.
func (o Outcome) Hung() bool { return o.Code == "hung" }

// Load is a steady load of tool calls and task submits on a deployment.
type Load struct {
	d *Deployment

	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	records  []Outcome
	inflight map[int64]time.Time
	seq      int64
	tasks    []submitted
}

type submitted struct {
	id string
	at time.Time
}

// StartLoad starts callers goroutines (half calling the stdio demo_echo on
// eight threads, half the HTTP demohttp_echo), each a call every pace, and
// a submitter of one two-step report task every taskPace.
func StartLoad(d *Deployment, callers int, pace, taskPace time.Duration) *Load {
	l := &Load{d: d, stop: make(chan struct{}), inflight: map[int64]time.Time{}}
	for i := range callers {
		tool, kind := "demo_echo", "stdio"
		if i%2 == 1 {
			tool, kind = "demohttp_echo", "http"
		}
		thread := fmt.Sprintf("load-%d", i%8)
		l.loop(pace, func(n int) {
			l.Do(kind, tool, thread, fmt.Sprintf(`{"message":"c%d-%d"}`, i, n))
		})
	}
	l.loop(taskPace, func(n int) {
		var id string
		l.do("submit", "demohttp_submit_report", func(ctx context.Context) error {
			r, err := d.Call(ctx, "demohttp_submit_report", fmt.Sprint("tasks-", n%4), `{"topic":"chaos","steps":2}`)
			if err == nil && (r.Task == nil || r.Task.TaskID == "") {
				err = bus.Errorf(bus.CodeInternal, "submit answered without a task handle")
			}
			if err == nil {
				id = r.Task.TaskID
			}
			return err
		})
		if id != "" {
			l.mu.Lock()
			l.tasks = append(l.tasks, submitted{id: id, at: time.Now()})
			l.mu.Unlock()
		}
	})
	return l
}

// loop runs fn every pace until Stop.
func (l *Load) loop(pace time.Duration, fn func(n int)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(pace)
		defer t.Stop()
		for n := 0; ; n++ {
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
			fn(n)
		}
	}()
}

// Do makes one tool call and records its outcome; a tool error (isError)
// counts as an answer.
func (l *Load) Do(kind, tool, thread, args string) {
	l.do(kind, tool+" thread="+thread, func(ctx context.Context) error {
		_, err := l.d.Call(ctx, tool, thread, args)
		return err
	})
}

func (l *Load) do(kind, detail string, call func(ctx context.Context) error) {
	start := time.Now()
	l.mu.Lock()
	l.seq++
	id := l.seq
	l.inflight[id] = start
	l.mu.Unlock()
	rid := fmt.Sprintf("chaos-%d", id)
	err := call(bus.WithRequestID(context.Background(), rid))
	o := Outcome{Start: start, Dur: time.Since(start), Kind: kind, ID: rid, Detail: detail}
	if err != nil {
		o.Code = string(bus.AsError(err).Code)
		if o.Dur >= HungAfter-100*time.Millisecond {
			o.Code = "hung"
		}
	}
	l.mu.Lock()
	delete(l.inflight, id)
	l.records = append(l.records, o)
	l.mu.Unlock()
}

// Stop stops the load and waits for the calls in flight.
func (l *Load) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// Window returns the outcomes of the requests started in [from, to), once
// all of them have ended, and the ids of the tasks submitted then.
func (l *Load) Window(from, to time.Time) ([]Outcome, []string) {
	for {
		l.mu.Lock()
		pending := false
		for _, s := range l.inflight {
			if s.Before(to) {
				pending = true
			}
		}
		if !pending {
			var out []Outcome
			for _, o := range l.records {
				if !o.Start.Before(from) && o.Start.Before(to) {
					out = append(out, o)
				}
			}
			var ids []string
			for _, t := range l.tasks {
				if !t.at.Before(from) && t.at.Before(to) {
					ids = append(ids, t.id)
				}
			}
			l.mu.Unlock()
			return out, ids
		}
		l.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

// LastFailureEnd is when the last failed load request (not a call of a
// fault tool, which is meant to fail) ended; zero when none failed.
func LastFailureEnd(outcomes []Outcome) time.Time {
	var last time.Time
	for _, o := range outcomes {
		if end := o.Start.Add(o.Dur); o.Code != "" && o.Kind != "fault" && end.After(last) {
			last = end
		}
	}
	return last
}

// TaskStatuses reads the statuses of task ids from the deployment's
// database, retrying while the database is unreachable (until ctx ends).
func TaskStatuses(ctx context.Context, dbURL string, ids []string) (map[string]string, error) {
	for {
		st, err := taskStatuses(ctx, dbURL, ids)
		if err == nil || ctx.Err() != nil {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func taskStatuses(ctx context.Context, dbURL string, ids []string) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id, status FROM mcp_tasks WHERE id = ANY($1)", ids)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return nil, err
		}
		out[id] = status
	}
	return out, rows.Err()
}

// WaitTasks waits until every task of ids is in a terminal state or
// timeout passes, and returns how many completed.
func WaitTasks(dbURL string, ids []string, timeout time.Duration) (completed int, statuses map[string]string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		statuses, err = TaskStatuses(ctx, dbURL, ids)
		if err != nil {
			return 0, nil, err
		}
		completed = 0
		open := 0
		for _, id := range ids {
			switch statuses[id] {
			case "completed":
				completed++
			case "failed", "cancelled":
			default:
				open++
			}
		}
		if open == 0 {
			return completed, statuses, nil
		}
		select {
		case <-ctx.Done():
			return completed, statuses, nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}
