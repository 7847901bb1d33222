package bus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
)

// errNotSent is the cause of a request given up before it was published:
// its connection to NATS was away for the whole of the caller's deadline.
var errNotSent = errors.New("not connected to NATS: the request was not sent")

// WaitConnected returns once nc is connected to a NATS server, or ctx's
// error when ctx ends first, or nats.ErrConnectionClosed. It waits on the
// connection's status events, not by polling.
//
// Connections made by Connect keep no reconnect buffer, so a publish
// while they reconnect fails (nats.ErrReconnectBufExceeded) instead of
// being delivered once the connection is back, perhaps after its caller
// gave up; a publisher that wants to wait out a NATS restart waits here
// and publishes again.
func WaitConnected(ctx context.Context, nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	// The listener is in place before the status is read again, so the
	// CONNECTED event cannot pass between the two.
	ch := nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer nc.RemoveStatusListener(ch)
	for {
		switch {
		case nc.IsConnected():
			return nil
		case nc.IsClosed():
			return nats.ErrConnectionClosed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// unsent reports whether err is a publish refused because the connection
// was reconnecting (nothing was sent).
func unsent(err error) bool {
	return errors.Is(err, nats.ErrReconnectBufExceeded)
}
