package api

import (
	"context"
	"time"

	"github.com/mcpbus/mcpbus/pkg/observability"
)

// publish publishes the config file (force: even when unchanged). It is
// the only way the file publisher is used, so the follower loop and config
// edits never race on it.
func (s *Service) publish(ctx context.Context, force bool) (bool, error) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.pub.PublishNow(ctx, force)
}

// followFile republishes the config file whenever its signature changes
// (hand edits), every PublishInterval, until ctx is done. A broken file is
// logged once and not published; the last good config stays in force.
func (s *Service) followFile(ctx context.Context) {
	t := time.NewTicker(s.cfg.PublishInterval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		published, err := s.publish(ctx, false)
		switch {
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			s.log.Warn("extensions config not published", observability.Err(err))
		case err == nil && published:
			lastErr = ""
			s.log.Info("extensions config changed; published", "path", s.cfg.ExtensionsPath)
		}
	}
}
