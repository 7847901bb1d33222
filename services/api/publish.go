package api

import (
	"context"
)

// publish publishes the config file (force: even when unchanged).
func (s *Service) publish(ctx context.Context, force bool) (bool, error) {
	return s.pub.PublishNow(ctx, force)
}
