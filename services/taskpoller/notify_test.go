package taskpoller_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

// event is one message read back from MCPBUS_EVENTS.
type event struct {
	msgID string
	body  bus.TaskEventMessage
}

// readEvents returns every task event of thread stored in the stream.
func readEvents(t *testing.T, b *testkit.Bus, thread string) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := b.JS.OrderedConsumer(ctx, b.Names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Names.TaskEvents(thread)},
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for pending := int(info.NumPending); len(out) < pending; {
		batch, err := cons.Fetch(pending-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			var e event
			e.msgID = m.Headers().Get(jetstream.MsgIDHeader)
			if err := json.Unmarshal(m.Data(), &e.body); err != nil {
				t.Fatalf("event body %s: %v", m.Data(), err)
			}
			out = append(out, e)
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return out
}

func TestNotificationsArePublishedOncePerEventVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		h.cfg.Tasks.InputRequiredPollInterval = 500 * time.Millisecond
		ask := h.fake.submit(map[string]any{"topic": "ask", "need_input": true, "steps": 2})
		askRow := insertTask(t, h.tasks, "u", "th-ev", ask, reportTools)
		plain := h.fake.submit(map[string]any{"topic": "plain", "steps": 2})
		plainRow := insertTask(t, h.tasks, "u", "th-ev", plain, reportTools)
		r := h.start()
		h.waitStatus(plainRow.ID, store.TaskStatusCompleted, 10*time.Second)
		h.waitStatus(askRow.ID, store.TaskStatusInputRequired, 10*time.Second)
		testkit.Eventually(t, 10*time.Second, "both events delivered", func() bool {
			return h.get(plainRow.ID).NotificationStatus == store.NotificationDelivered &&
				h.get(askRow.ID).NotificationStatus == store.NotificationDelivered
		})
		// The task answers and completes: a second event version.
		answer(t, h.fake, ask)
		r.stop(t)
		h.start() // a new replica continues from the rows
		h.waitStatus(askRow.ID, store.TaskStatusCompleted, 10*time.Second)
		testkit.Eventually(t, 10*time.Second, "the second event delivered", func() bool {
			row := h.get(askRow.ID)
			return row.NotifiedVersion == 2 && row.NotificationStatus == store.NotificationDelivered
		})
		events := readEvents(t, h.bus, "th-ev")
		got := map[string]bus.TaskEventMessage{}
		for _, e := range events {
			if _, dup := got[e.msgID]; dup {
				t.Fatalf("event %s published twice", e.msgID)
			}
			got[e.msgID] = e.body
		}
		want := map[string]string{
			bus.TaskEventMsgID(plainRow.ID, 1): store.TaskStatusCompleted,
			bus.TaskEventMsgID(askRow.ID, 1):   store.TaskStatusInputRequired,
			bus.TaskEventMsgID(askRow.ID, 2):   store.TaskStatusCompleted,
		}
		if len(got) != len(want) {
			t.Fatalf("events %v, want %v", keys(got), want)
		}
		for id, status := range want {
			ev, ok := got[id]
			if !ok || ev.Status != status || ev.ThreadID != "th-ev" || ev.UserID != "u" {
				t.Fatalf("event %s = %+v, want status %s", id, ev, status)
			}
		}
		if ev := got[bus.TaskEventMsgID(askRow.ID, 1)]; ev.InputRequired == nil || ev.EventVersion != 1 {
			t.Fatalf("input_required event %+v", ev)
		}
		if ev := got[bus.TaskEventMsgID(plainRow.ID, 1)]; !strings.Contains(string(ev.Result), "plain") {
			t.Fatalf("completed event result %s", ev.Result)
		}
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// answer answers an input_required demo task outside mcpbus.
func answer(t *testing.T, f *fakeToolcall, rid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var call mcp.CallToolRequest
	call.Params.Name = "answer_report"
	call.Params.Arguments = map[string]any{"task_id": rid, "answer": "engineers"}
	res, err := f.mcp.CallTool(ctx, call)
	if err != nil || res.IsError {
		t.Fatalf("answer_report: %v %+v", err, res)
	}
}

// flakyPublisher is the real JetStream publisher with a switch that fails
// publishes (a spy at the edge, not a mock of JetStream).
type flakyPublisher struct {
	jetstream.JetStream
	mu       sync.Mutex
	failNext int  // publishes still to fail
	failAll  bool // fail every publish
	attempts int
}

func (p *flakyPublisher) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	p.mu.Lock()
	p.attempts++
	fail := p.failAll || p.failNext > 0
	if p.failNext > 0 {
		p.failNext--
	}
	p.mu.Unlock()
	if fail {
		return nil, errors.New("nats: no response from stream")
	}
	return p.JetStream.PublishMsg(ctx, m, opts...)
}

func TestFailedPublishIsRetriedThenDeadLettered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		pub := &flakyPublisher{JetStream: h.bus.JS, failNext: 2}
		retried := insertTask(t, h.tasks, "u", "th-retry", "t404", tasks.DriverData{StatusTool: "get_report_status", CancelTool: "cancel_report"})
		r := h.start(func(_ *taskpoller.Config, d *taskpoller.Deps) { d.Events = pub })
		row := h.waitStatus(retried.ID, store.TaskStatusFailed, 10*time.Second)
		testkit.Eventually(t, 10*time.Second, "delivery after two failures", func() bool {
			row = h.get(retried.ID)
			return row.NotificationStatus == store.NotificationDelivered
		})
		if row.NotificationAttemptCount != 2 || row.NotifiedVersion != 1 {
			t.Fatalf("retried row: attempts %d notified %d", row.NotificationAttemptCount, row.NotifiedVersion)
		}
		if events := readEvents(t, h.bus, "th-retry"); len(events) != 1 || events[0].msgID != bus.TaskEventMsgID(row.ID, 1) {
			t.Fatalf("events after retries: %+v", events)
		}
		r.stop(t)

		pub.mu.Lock()
		pub.failAll = true
		pub.mu.Unlock()
		dead := insertTask(t, h.tasks, "u", "th-dead", "t405", tasks.DriverData{StatusTool: "get_report_status", CancelTool: "cancel_report"})
		h.start(func(_ *taskpoller.Config, d *taskpoller.Deps) { d.Events = pub })
		testkit.Eventually(t, 15*time.Second, "dead letter", func() bool {
			row = h.get(dead.ID)
			return row.NotificationStatus == store.NotificationDeadLetter
		})
		if row.NotificationAttemptCount != tasks.MaxNotificationAttempts ||
			row.NotificationError != "Notification delivery stopped after 5 failed attempts: publish failed: nats: no response from stream" {
			t.Fatalf("dead-lettered row: attempts %d error %q", row.NotificationAttemptCount, row.NotificationError)
		}
		if events := readEvents(t, h.bus, "th-dead"); len(events) != 0 {
			t.Fatalf("a dead-lettered event was published: %+v", events)
		}
	})
}
