package bus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// errConnDropped is the cause of a request given up because its
// connection to NATS dropped while it waited: the reply, if the responder
// sends one, is published while this connection is away and lost, so
// waiting for the deadline would only make the caller hang.
var errConnDropped = errors.New("the connection to NATS dropped while waiting for the reply")

// dropWatch follows one connection: cur is a context cancelled the next
// time the connection drops (then replaced by a fresh one).
type dropWatch struct {
	cur atomic.Pointer[dropCtx]
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
// (disconnects, starts reconnecting or closes). One status listener per connection serves every
// request; it ends when the connection closes.
func dropped(nc *nats.Conn) context.Context {
	if w, ok := drops.Load(nc); ok {
		return w.(*dropWatch).cur.Load().ctx
	}
	w := &dropWatch{}
	w.cur.Store(newDropCtx())
	actual, loaded := drops.LoadOrStore(nc, w)
	if loaded {
		return actual.(*dropWatch).cur.Load().ctx
	}
	ch := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	go func() {
		defer nc.RemoveStatusListener(ch)
		defer drops.Delete(nc)
		for st := range ch {
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
	return w.cur.Load().ctx
}
