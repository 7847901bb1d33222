package bus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// errConnDropped is the cause of a request given up because its
// connection to NATS dropped while it waited: the reply, if the responder
// sends one, is published while this connection is away and lost, so
// waiting for the deadline would only make the caller hang.
var errConnDropped = errors.New("the connection to NATS dropped while waiting for the reply")

// dropWatch follows one connection: cur is a context cancelled the next
// time the connection drops (then replaced by a fresh one); back is when
// it last reconnected (Unix nanoseconds, 0: never).
type dropWatch struct {
	cur  atomic.Pointer[dropCtx]
	back atomic.Int64
}

type dropCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newDropCtx() *dropCtx {
	ctx, cancel := context.WithCancel(context.Background())
	return &dropCtx{ctx: ctx, cancel: cancel}
}

// drops holds a watch per connection, made by the first request on it.
var drops sync.Map // *nats.Conn → *dropWatch

// dropped returns a context that is cancelled when nc next drops
// (disconnects, starts reconnecting or closes). One status listener per
// connection serves every request (and reconnectedWithin); it ends when
// the connection closes.
func dropped(nc *nats.Conn) context.Context {
	return watchOf(nc).cur.Load().ctx
}

// reconnectedWithin reports whether nc reconnected less than d ago.
func reconnectedWithin(nc *nats.Conn, d time.Duration) bool {
	back := watchOf(nc).back.Load()
	return back != 0 && time.Since(time.Unix(0, back)) < d
}

// watchOf returns nc's watch, starting it on first use.
func watchOf(nc *nats.Conn) *dropWatch {
	if w, ok := drops.Load(nc); ok {
		return w.(*dropWatch)
	}
	w := &dropWatch{}
	w.cur.Store(newDropCtx())
	actual, loaded := drops.LoadOrStore(nc, w)
	if loaded {
		return actual.(*dropWatch)
	}
	ch := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED, nats.CONNECTED)
	go func() {
		defer nc.RemoveStatusListener(ch)
		defer drops.Delete(nc)
		for st := range ch {
			if st == nats.CONNECTED {
				w.back.Store(time.Now().UnixNano())
				continue
			}
			old := w.cur.Swap(newDropCtx())
			old.cancel()
			if st == nats.CLOSED {
				w.cur.Load().cancel()
				return
			}
		}
	}()
	if nc.IsClosed() { // closed before the listener was registered: no event will come
		nc.RemoveStatusListener(ch) // ends the goroutine
		w.cur.Load().cancel()
	}
	return w
}
