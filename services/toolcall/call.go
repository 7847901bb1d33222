package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

func (s *Service) handleCall(ctx context.Context, req bus.ToolsCallRequest) (bus.ToolsCallReply, error) {
	if req.Tool == "" {
		return bus.ToolsCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "tool is required")
	}
	if err := rejectMetadataAuthToken(req.Metadata); err != nil {
		return bus.ToolsCallReply{}, err
	}
	if len(req.Arguments) > 0 {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(req.Arguments, &probe); err != nil {
			return bus.ToolsCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "arguments must be a JSON object")
		}
	}
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	snap := s.watcher.Current()
	tool, err := s.resolver.resolve(ctx, req.Tool, snap.Generation)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	srv := snap.Extensions.Server(tool.Server)
	if srv == nil || !srv.Enabled {
		return bus.ToolsCallReply{}, bus.Errorf(bus.CodeNotFound, "tool '%s': MCP server '%s' is not configured or disabled", req.Tool, tool.Server)
	}
	res, err := s.callUpstream(ctx, srv, tool.OriginalName, req)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	return bus.ToolsCallReply{
		Tool: req.Tool, Server: srv.Name,
		Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError,
	}, nil
}

// rejectMetadataAuthToken refuses the legacy credential carriers.
func rejectMetadataAuthToken(meta json.RawMessage) error {
	if len(meta) == 0 {
		return nil
	}
	var m struct {
		AuthToken json.RawMessage `json:"auth_token"`
		Config    *struct {
			Metadata struct {
				AuthToken json.RawMessage `json:"auth_token"`
			} `json:"metadata"`
		} `json:"config"`
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		return bus.Errorf(bus.CodeInvalidRequest, "metadata must be a JSON object")
	}
	if m.AuthToken != nil || (m.Config != nil && m.Config.Metadata.AuthToken != nil) {
		return bus.Errorf(bus.CodeInvalidRequest, "metadata.auth_token is not supported; pass request credentials in context.secrets")
	}
	return nil
}

// callUpstream runs one call on a pooled session. A failed or timed-out call
// closes that session so the next call starts clean; an HTTP session the
// upstream forgot gets one fresh initialize and one retry.
func (s *Service) callUpstream(ctx context.Context, srv *config.Server, raw string, req bus.ToolsCallRequest) (*mcpclient.CallResult, error) {
	key, dir, env, err := s.sessionTarget(srv, req)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		sess, err := s.pool.get(ctx, key, srv.Fingerprint, func(context.Context) (*mcpclient.Client, error) {
			return s.connect(srv, dir, env)
		})
		if err != nil {
			return nil, connectError(srv, err)
		}
		callCtx := ctx
		if srv.ToolCallTimeout > 0 {
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, srv.ToolCallTimeout)
			defer cancel()
		}
		res, err := sess.client.CallTool(callCtx, raw, req.Arguments, nil)
		if err == nil {
			return res, nil
		}
		s.pool.drop(sess)
		if errors.Is(err, mcpclient.ErrSessionExpired) && attempt == 0 {
			s.log.Info("upstream forgot the session; reconnecting once", observability.Server(srv.Name))
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) || callCtx.Err() != nil {
			return nil, bus.Wrap(bus.CodeUpstreamTimeout, err, fmt.Sprintf("tool '%s' on MCP server '%s' timed out", raw, srv.Name))
		}
		return nil, bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("tool '%s' on MCP server '%s' failed: %v", raw, srv.Name, err))
	}
}

// connect opens a session under the server's session_init_timeout,
// independent of the caller's context so concurrent waiters share it.
func (s *Service) connect(srv *config.Server, dir string, env map[string]string) (*mcpclient.Client, error) {
	ctx := context.Background()
	if srv.SessionInitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, srv.SessionInitTimeout)
		defer cancel()
	}
	c, err := mcpclient.Connect(ctx, mcpclient.Spec{
		Server: srv.Name, Transport: srv.Type,
		Command: srv.Command, Args: srv.Args, Env: env, Dir: dir,
		URL: srv.URL, Headers: srv.Headers,
		Logger:     s.log.With(observability.Server(srv.Name)),
		ClientName: "mcpbus-toolcall", ClientVersion: "0.1.0",
	})
	if err != nil && ctx.Err() != nil {
		return nil, bus.Wrap(bus.CodeInitTimeout, err, fmt.Sprintf("MCP server '%s' did not initialize within session_init_timeout (%s)", srv.Name, srv.SessionInitTimeout))
	}
	return c, err
}

func connectError(srv *config.Server, err error) error {
	var be *bus.Error
	if errors.As(err, &be) {
		return be
	}
	return bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("cannot connect to MCP server '%s': %v", srv.Name, err))
}
