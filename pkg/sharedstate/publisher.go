package sharedstate

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// FilePublisher owns the extensions config file: it publishes the file at
// start and again whenever its signature (path, mtime, size, content hash)
// changes, so hand edits reach every replica. Its first publication is the
// startup publication (ConfigRecord.Startup); every later one carries the
// deployment's baseline: the newest startup publication in the KV bucket,
// whichever file owner (api replica) made it, so replicas never flip the
// baseline between them. Use one FilePublisher per process lifetime. Its
// methods are safe for concurrent use.
type FilePublisher struct {
	KV       jetstream.KeyValue
	Path     string
	Interval time.Duration // default 1s
	Log      *slog.Logger

	mu      sync.Mutex
	last    config.Signature
	startup *BaselineRecord // this publisher's startup publication
}

// PublishNow reads and publishes the file if it changed since the last
// publication (force publishes regardless). It reports whether it published.
func (p *FilePublisher) PublishNow(ctx context.Context, force bool) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !force && p.last.Path != "" {
		changed, err := config.StatChanged(p.Path, p.last)
		if err != nil || !changed {
			return false, err
		}
	}
	rec, err := ReadFileRecord(p.Path)
	if err != nil {
		return false, err
	}
	if p.startup == nil {
		rec.Startup = true
	} else {
		rec.Baseline = p.startup
		if b, err := CurrentBaseline(ctx, p.KV); err == nil && b != nil && b.Epoch >= p.startup.Epoch {
			rec.Baseline = b
		}
	}
	rev, err := putConfig(ctx, p.KV, rec)
	if err != nil {
		return false, err
	}
	if p.startup == nil {
		p.startup = &BaselineRecord{Epoch: rev, Path: rec.Path, Raw: rec.Raw}
	}
	p.last = rec.Signature
	return true, nil
}

// PublishIfStatChanged is the cheap check made on a lookup: one stat, and a
// publication only when the file's mtime or size moved. Edits that keep both
// are caught by Run, which also compares the content hash.
func (p *FilePublisher) PublishIfStatChanged(ctx context.Context) (bool, error) {
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	st, err := os.Stat(p.Path)
	if err != nil || last.Path == "" || (st.ModTime().Equal(last.ModTime) && st.Size() == last.Size) {
		return false, nil
	}
	return p.PublishNow(ctx, false)
}

// Run checks the file every Interval until ctx is done. A broken file is
// logged and not published; the last good config stays in force.
func (p *FilePublisher) Run(ctx context.Context) {
	interval := p.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		published, err := p.PublishNow(ctx, false)
		switch {
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			p.Log.Warn("extensions config not published", observability.Err(err))
		case published:
			lastErr = ""
			p.Log.Info("extensions config changed; published", "path", p.Path)
			p.logProblems()
		}
	}
}

// logProblems logs the errors of the file just published (the config rules
// every service applies; their messages never carry a value): each names
// a server every service skips, or an interceptor entry they ignore.
func (p *FilePublisher) logProblems() {
	raw, err := os.ReadFile(p.Path)
	if err != nil {
		return
	}
	ext, err := config.ParseExtensions(p.Path, raw)
	if err != nil {
		return
	}
	for _, pr := range ext.Problems {
		if pr.Severity == config.SeverityError {
			p.Log.Warn("extensions config error: services skip this entry", "problem", pr.String())
		}
	}
}
