package presence_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// laggingKV is the real presence bucket seen through a copy that answers
// wrong for a while: GetRevision says "key not found" for its first
// missing calls (a direct get served by a copy that has not caught up
// with the write yet), and PutString hangs until its context ends once
// hang is set (the bucket has no leader: the replica is cut off, or an
// election is under way). Everything else is the bucket's own answer.
type laggingKV struct {
	jetstream.KeyValue
	missing atomic.Int32
	gets    atomic.Int32
	hang    atomic.Bool
	hung    chan struct{} // closed at the first hanging write
	once    sync.Once
}

func (k *laggingKV) GetRevision(ctx context.Context, key string, rev uint64) (jetstream.KeyValueEntry, error) {
	k.gets.Add(1)
	if k.missing.Add(-1) >= 0 {
		return nil, jetstream.ErrKeyNotFound
	}
	return k.KeyValue.GetRevision(ctx, key, rev)
}

func (k *laggingKV) PutString(ctx context.Context, key, value string) (uint64, error) {
	if k.hang.Load() {
		k.once.Do(func() { close(k.hung) })
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return k.KeyValue.PutString(ctx, key, value)
}

// A replica starting while the copy that answers its read-back has not
// caught up with its first heartbeat reads again until the heartbeat is
// there, instead of failing to start (a toolcall replica on a lagging
// node of a cluster once exited this way).
func TestStartReadsItsHeartbeatAgainWhenACopyLags(t *testing.T) {
	t.Parallel()
	kv := &laggingKV{KeyValue: presenceKV(t), hung: make(chan struct{})}
	kv.missing.Store(3)
	tr, _ := start(t, kv, "late") // fails the test when Start does
	if n := kv.gets.Load(); n != 4 {
		t.Errorf("%d reads of the heartbeat, want 4 (three 'not found' from the lagging copy, then the heartbeat)", n)
	}
	if live := tr.Live(); len(live) != 1 || live[0] != "late" {
		t.Errorf("live = %v, want [late]", live)
	}
}

// A replica whose own heartbeat cannot be written (each write hangs)
// still expires a replica that went silent: each write is bounded to one
// interval and the expiries are computed at every beat, so the silent
// replica leaves the live set (and the calls waiting on it end) instead
// of staying live for as long as the writes hang.
func TestSilentReplicaExpiresWhileOwnHeartbeatHangs(t *testing.T) {
	t.Parallel()
	kv := &laggingKV{KeyValue: presenceKV(t), hung: make(chan struct{})}
	tr, _ := start(t, kv, "a")
	// A peer beats once and then never again (SIGSTOPped, cut off).
	if _, err := kv.KeyValue.PutString(context.Background(), "svc.ghost", time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "a to see the peer", func() bool { return tr.Owner("x") != "" && len(tr.Live()) == 2 })
	gone := tr.GoneCh("ghost")
	kv.hang.Store(true)
	testkit.Receive(t, 30*time.Second, "a heartbeat write to hang", kv.hung)
	testkit.Receive(t, 30*time.Second, "the silent peer to expire while a's own heartbeat writes hang", gone)
	if live := tr.Live(); len(live) != 1 || live[0] != "a" {
		t.Errorf("live = %v, want [a]", live)
	}
}
