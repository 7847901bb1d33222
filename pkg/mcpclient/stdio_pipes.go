package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// Shutdown steps of a stdio child, mcp-go's: after stdin closes, wait, then
// SIGTERM and wait again (Close then kills the whole group).
const (
	stdioGracefulExit = 2 * time.Second
	stdioTermExit     = 3 * time.Second
)

// pipedStdio is mcp-go's stdio transport over pipes this package owns, so
// the child's stdout is read through a lineLimitReader: mcp-go reads
// stdout lines with an unbounded ReadString, and its own spawn gives no
// way to wrap the pipe. Spawning goes through the same CommandFunc.
type pipedStdio struct {
	*transport.Stdio

	command string
	args    []string
	cmdFunc transport.CommandFunc
	stderr  io.Writer

	stdinR, stdinW   *os.File
	stdoutR, stdoutW *os.File
	stderrR, stderrW *os.File
	drained          chan struct{} // closed when stderr is drained

	mu  sync.Mutex
	cmd *exec.Cmd

	closeOnce sync.Once
	closeErr  error
}

func (c *Client) newPipedStdio(command string, args []string, cmdFunc transport.CommandFunc) (transport.Interface, error) {
	t := &pipedStdio{command: command, args: args, cmdFunc: cmdFunc, stderr: c.stderr, drained: make(chan struct{})}
	var err error
	if t.stdinR, t.stdinW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("failed to create stdin pipe: %w", err)
	}
	if t.stdoutR, t.stdoutW, err = os.Pipe(); err != nil {
		t.closeAll()
		return nil, fmt.Errorf("failed to create stdout pipe: %w", err)
	}
	if t.stderrR, t.stderrW, err = os.Pipe(); err != nil {
		t.closeAll()
		return nil, fmt.Errorf("failed to create stderr pipe: %w", err)
	}
	stdout := &lineLimitReader{r: t.stdoutR, limit: c.limit, err: c.tooLarge(), trip: func() {
		c.streamTrip.Store(true)
		c.logger.Warn("mcp server wrote a stdout line over the response limit; ending the session", "limit_bytes", c.limit)
		// The child would block writing the rest; the session is over.
		c.proc.kill()
	}}
	t.Stdio = transport.NewIO(stdout, t.stdinW, nil)
	transport.WithCommandLogger(c.logger)(t.Stdio)
	c.pipes = t
	return t, nil
}

// Start spawns the child on the pipes, then starts mcp-go's reader.
func (t *pipedStdio) Start(ctx context.Context) error {
	cmd, err := t.cmdFunc(ctx, t.command, nil, t.args)
	if err != nil {
		t.closeAll()
		return err
	}
	cmd.Stdin, cmd.Stdout = t.stdinR, t.stdoutW
	ownStderr := cmd.Stderr == nil
	if ownStderr {
		cmd.Stderr = t.stderrW
	} else {
		// The CommandFunc chose where stderr goes (exec copies it, and
		// Wait waits for the copy): the pipe here is not needed.
		_ = t.stderrR.Close()
		close(t.drained)
	}
	if err := cmd.Start(); err != nil {
		t.closeAll()
		return fmt.Errorf("failed to start command: %w", err)
	}
	t.mu.Lock()
	t.cmd = cmd
	t.mu.Unlock()
	// The child has its ends now.
	_ = t.stdinR.Close()
	_ = t.stdoutW.Close()
	_ = t.stderrW.Close()
	if ownStderr {
		go func() {
			defer close(t.drained)
			_, _ = io.Copy(t.stderr, t.stderrR)
		}()
	}
	return t.Stdio.Start(ctx)
}

// Close closes the child's stdin and waits for it to exit: stdioGracefulExit,
// then SIGTERM and stdioTermExit. What is left is the caller's to kill
// (Client.shutdown kills the group, then calls release).
func (t *pipedStdio) Close() error {
	t.closeOnce.Do(func() { t.closeErr = t.close() })
	return t.closeErr
}

func (t *pipedStdio) close() error {
	err := t.Stdio.Close() // closes stdinW
	t.mu.Lock()
	cmd := t.cmd
	t.mu.Unlock()
	if cmd == nil {
		t.closeAll()
		return err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case werr := <-waited:
		return errors.Join(err, werr)
	case <-time.After(stdioGracefulExit):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case werr := <-waited:
		return errors.Join(err, werr)
	case <-time.After(stdioTermExit):
		return errors.Join(err, transport.ErrChildShutdownTimeout)
	}
}

// release closes the parent's ends once the child's group is gone (a
// descendant that left the group may still hold stdout or stderr open:
// closing them here ends mcp-go's reader and the stderr drain anyway).
func (t *pipedStdio) release() {
	_ = t.stdoutR.Close()
	select {
	case <-t.drained:
	case <-time.After(100 * time.Millisecond):
		// Something outside the group still holds stderr.
	}
	_ = t.stderrR.Close()
	<-t.drained
}

// closeAll closes every pipe end (setup failed, or nothing started).
func (t *pipedStdio) closeAll() {
	for _, f := range []*os.File{t.stdinR, t.stdinW, t.stdoutR, t.stdoutW, t.stderrR, t.stderrW} {
		if f != nil {
			_ = f.Close()
		}
	}
	select {
	case <-t.drained:
	default:
		t.mu.Lock()
		started := t.cmd != nil
		t.mu.Unlock()
		if !started {
			close(t.drained)
		}
	}
}
