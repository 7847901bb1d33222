package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// maxStdioLine bounds one message on stdin (the REST body limit's order of
// magnitude; a client sending more is broken).
const maxStdioLine = 16 << 20

// ServeStdio serves MCP on r and w (the stdio transport: one JSON-RPC
// message per line) for one caller until r ends or ctx is cancelled. The
// session is this process's: kept in memory, one per stream. Requests are
// answered concurrently (a slow tool call does not hold up a ping); writes
// are serialised. It returns once every request in flight is answered.
// Catalog changes reach the client as notifications/tools/list_changed.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, x Exchange) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wmu sync.Mutex
		xmu sync.Mutex // guards x: initialize and setLevel change it
		wg  sync.WaitGroup
	)
	write := func(m *Message) error {
		b := m.Encode()
		wmu.Lock()
		defer wmu.Unlock()
		_, err := w.Write(append(b, '\n'))
		return err
	}
	// Progress of a call goes out on stdout like everything else.
	x.Notify = func(m *Message) { _ = write(m) }
	// list_changed: a new catalog, a change of this user's personal
	// connections or a tool_search promotion, once the session is
	// initialized.
	notify := func(*nats.Msg) {
		xmu.Lock()
		ready := x.Session != nil
		xmu.Unlock()
		if ready {
			_ = write(Notification("notifications/tools/list_changed", nil))
		}
	}
	promotedHere := func(m *nats.Msg) {
		var ev bus.ToolsSearchRequest
		if json.Unmarshal(m.Data, &ev) == nil && ev.UserID == x.UserID {
			notify(m)
		}
	}
	for subject, fn := range map[string]nats.MsgHandler{s.deps.Names.EventsCatalog(): notify, s.deps.Names.PersonalEvents(x.UserID): notify, s.deps.Names.InternalMCPPromoted(): promotedHere} {
		sub, err := s.deps.NC.Subscribe(subject, fn)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subject, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxStdioLine)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-readErr:
			break loop
		case line := <-lines:
			if len(line) == 0 {
				continue
			}
			m, perr := Parse(line)
			if perr != nil {
				var id json.RawMessage
				if m != nil {
					id = m.ID
				}
				if werr := write(ErrorReply(id, perr)); werr != nil {
					err = werr
					break loop
				}
				continue
			}
			// initialize runs alone so the session it creates is seen by
			// what follows; everything else runs concurrently on a copy.
			if m.Method == "initialize" || m.Method == "logging/setLevel" {
				xmu.Lock()
				resp := s.Era(m.Method, "").Dispatch(ctx, &x, m)
				xmu.Unlock()
				if resp != nil {
					if werr := write(resp); werr != nil {
						err = werr
						break loop
					}
				}
				continue
			}
			xmu.Lock()
			cx := x
			if x.Session != nil {
				sess := *x.Session
				cx.Session = &sess
			}
			xmu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if resp := s.Era(m.Method, "").Dispatch(ctx, &cx, m); resp != nil {
					_ = write(resp)
				}
			}()
		}
	}
	wg.Wait()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}
