package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The federation routes (docs/federation.md §4): the caller's resources,
// templates and prompts from discovery, reads, prompt gets and completions
// through toolcall, every name and URI the visible one.

// resourcesReply is GET /api/mcp/resources.
type resourcesReply struct {
	Generation        int64                  `json:"generation"`
	Revision          string                 `json:"revision"`
	Resources         []bus.Resource         `json:"resources"`
	ResourceTemplates []bus.ResourceTemplate `json:"resource_templates"`
	FailedServers     []bus.FailedServer     `json:"failed_servers"`
}

func (s *Service) listResources(c echo.Context) error {
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	pg, paged, err := pageOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.busCtx(c)
	defer cancel()
	req := bus.FedListRequest{UserID: callerOf(c).UserID, ThreadID: c.QueryParam("thread_id"), VirtualServer: set}
	res, err := bus.Request[bus.ResourcesListReply](ctx, s.deps.NC, s.deps.Names.ResourcesList(), req)
	if err != nil {
		return err
	}
	tpl, err := bus.Request[bus.ResourceTemplatesListReply](ctx, s.deps.NC, s.deps.Names.ResourceTemplatesList(), req)
	if err != nil {
		return err
	}
	failed := res.FailedServers
	for _, f := range tpl.FailedServers {
		if !containsFailed(failed, f) {
			failed = append(failed, f)
		}
	}
	out := resourcesReply{Generation: res.Generation, Revision: res.Revision + "." + tpl.Revision,
		Resources: res.Resources, ResourceTemplates: tpl.ResourceTemplates, FailedServers: failed}
	if paged {
		return pageResources(c, pg, out)
	}
	return c.JSON(http.StatusOK, out)
}

func containsFailed(list []bus.FailedServer, f bus.FailedServer) bool {
	for _, g := range list {
		if g == f {
			return true
		}
	}
	return false
}

// readBody is the body of POST /api/mcp/resources/read.
type readBody struct {
	URI       string           `json:"uri"`
	ThreadID  string           `json:"thread_id"`
	Context   *bus.CallContext `json:"context"`
	Metadata  json.RawMessage  `json:"metadata"`
	TimeoutMS int64            `json:"timeout_ms"`
}

func (s *Service) readResource(c echo.Context) error {
	var body readBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if err := bus.RejectMetadataAuthToken(body.Metadata); err != nil {
		return &statusError{status: http.StatusUnprocessableEntity, err: bus.AsError(err)}
	}
	if body.URI == "" {
		return bus.Errorf(bus.CodeInvalidRequest, "uri: required")
	}
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.busCtx(c)
	defer cancel()
	reply, err := bus.RequestRaw(ctx, s.deps.NC, s.deps.Names.ResourcesRead(), bus.ResourcesReadRequest{
		URI: body.URI, UserID: callerOf(c).UserID, ThreadID: body.ThreadID, Context: body.Context, Metadata: body.Metadata, TimeoutMS: body.TimeoutMS,
		VirtualServer: set})
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, reply)
}

func (s *Service) listPrompts(c echo.Context) error {
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	pg, paged, err := pageOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.busCtx(c)
	defer cancel()
	req := bus.FedListRequest{UserID: callerOf(c).UserID, ThreadID: c.QueryParam("thread_id"), VirtualServer: set}
	if paged {
		list, err := bus.Request[bus.PromptsListReply](ctx, s.deps.NC, s.deps.Names.PromptsList(), req)
		if err != nil {
			return err
		}
		return pagePrompts(c, pg, &list)
	}
	reply, err := bus.RequestRaw(ctx, s.deps.NC, s.deps.Names.PromptsList(), req)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, reply)
}

// describePrompt is GET /api/mcp/prompts/{name}: the prompt's definition.
func (s *Service) describePrompt(c echo.Context) error {
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.busCtx(c)
	defer cancel()
	list, err := bus.Request[bus.PromptsListReply](ctx, s.deps.NC, s.deps.Names.PromptsList(), bus.FedListRequest{UserID: callerOf(c).UserID, ThreadID: c.QueryParam("thread_id"), VirtualServer: set})
	if err != nil {
		return err
	}
	name := c.Param("name")
	for _, p := range list.Prompts {
		if p.Name == name {
			return c.JSON(http.StatusOK, p)
		}
	}
	return bus.Errorf(bus.CodeNotFound, "prompt '%s' is not one of your prompts", bus.SafeServerName(name))
}

// promptBody is the body of POST /api/mcp/prompts/{name}.
type promptBody struct {
	Arguments json.RawMessage  `json:"arguments"`
	ThreadID  string           `json:"thread_id"`
	Context   *bus.CallContext `json:"context"`
	Metadata  json.RawMessage  `json:"metadata"`
	TimeoutMS int64            `json:"timeout_ms"`
}

func (s *Service) getPrompt(c echo.Context) error {
	var body promptBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if err := bus.RejectMetadataAuthToken(body.Metadata); err != nil {
		return &statusError{status: http.StatusUnprocessableEntity, err: bus.AsError(err)}
	}
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.busCtx(c)
	defer cancel()
	reply, err := bus.RequestRaw(ctx, s.deps.NC, s.deps.Names.PromptsGet(), bus.PromptsGetRequest{
		Name: c.Param("name"), Arguments: body.Arguments, UserID: callerOf(c).UserID, ThreadID: body.ThreadID,
		Context: body.Context, Metadata: body.Metadata, TimeoutMS: body.TimeoutMS, VirtualServer: set})
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, reply)
}

// completionBody is the body of POST /api/mcp/completion.
type completionBody struct {
	Ref              bus.CompletionRef      `json:"ref"`
	Argument         bus.CompletionArgument `json:"argument"`
	ContextArguments map[string]string      `json:"context_arguments"`
	ThreadID         string                 `json:"thread_id"`
	Context          *bus.CallContext       `json:"context"`
}

func (s *Service) complete(c echo.Context) error {
	var body completionBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.busCtx(c)
	defer cancel()
	reply, err := bus.RequestRaw(ctx, s.deps.NC, s.deps.Names.CompletionComplete(), bus.CompletionRequest{
		Ref: body.Ref, Argument: body.Argument, ContextArguments: body.ContextArguments, UserID: callerOf(c).UserID,
		ThreadID: body.ThreadID, Context: body.Context, VirtualServer: set})
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, reply)
}
