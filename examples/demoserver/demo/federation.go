package demo

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The federation catalog (-federation): resources, a template, an MCP
// Apps ui:// resource, a prompt with a completable argument and tools that
// return a resource_link and name a ui:// resource, for the tests of
// mcpbus's federation. The text of every answer names the instance
// (DEMO_INSTANCE, default "demo"), so two servers that share URIs and
// prompt names can be told apart through mcpbus.

// FederationOptions are the server options the federation catalog needs.
// Its hooks (added to whatever hooks the server has, by addFederation)
// count resources/subscribe and resources/unsubscribe (the
// subscription_counts tool) and keep the 2026-07-28 listens that carry
// resource subscriptions (listens).
func FederationOptions() []server.ServerOption {
	return []server.ServerOption{server.WithResourceCapabilities(true, true), server.WithPromptCapabilities(true),
		server.WithCompletions(), server.WithPromptCompletionProvider(fedCompletions{}), server.WithResourceCompletionProvider(fedCompletions{}),
		server.WithLogging()}
}

// subscribes and unsubscribes count the resources/subscribe and
// resources/unsubscribe requests this process answered.
var subscribes, unsubscribes atomic.Int64

// ToolSubscriptionCounts answers SubscriptionCounts(subscribes,
// unsubscribes): the resources/subscribe and resources/unsubscribe
// requests the process answered, over all its sessions.
const ToolSubscriptionCounts = "subscription_counts"

// SubscriptionCounts is subscription_counts' text.
func SubscriptionCounts(subscribe, unsubscribe int64) string {
	return fmt.Sprintf("subscribe=%d unsubscribe=%d", subscribe, unsubscribe)
}

// Federation URIs.
const (
	GreetingURI = "demo://greeting"
	// ProgressURI's read sends two notifications/progress (when asked
	// for) and one log message per level, as the prompt ProgressPrompt.
	ProgressURI = "demo://progress"
	BlobURI     = "demo://blob"
	WidgetURI   = "ui://widget/app.html"
	// NoteTemplate's {id} is completed from NoteIDs.
	NoteTemplate = "demo://notes/{id}"
	// AppMIMEType is MCP Apps' HTML profile.
	AppMIMEType = "text/html;profile=mcp-app"
)

// BlobBytes are demo://blob's bytes (served base64, as MCP sends blobs).
var BlobBytes = []byte{0, 1, 2, 0xfe, 0xff, 'm', 'c', 'p'}

// NoteIDs and GreetNames are what completion/complete offers.
var (
	NoteIDs    = []string{"alpha", "alpine", "beta"}
	GreetNames = []string{"Alice", "Albert", "Bob"}
)

func instance() string {
	if v := os.Getenv("DEMO_INSTANCE"); v != "" {
		return v
	}
	return "demo"
}

// WidgetMeta is the ui:// resource's _meta (its CSP), passed through
// unchanged.
var WidgetMeta = map[string]any{"ui": map[string]any{"csp": map[string]any{"connectDomains": []any{"https://api.example"}}}}

// ToolTouchGreeting changes demo://greeting (its text gains a revision)
// and sends notifications/resources/updated for it.
const ToolTouchGreeting = "touch_greeting"

// GreetingText is demo://greeting's text at revision rev (0 until
// touch_greeting is called).
func GreetingText(rev int64) string {
	if rev == 0 {
		return "hello from " + instance()
	}
	return fmt.Sprintf("hello from %s (revision %d)", instance(), rev)
}

func addFederation(s *server.MCPServer) {
	hooks := s.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(s)
	}
	hooks.AddAfterSubscribe(func(context.Context, any, *mcp.SubscribeRequest, *mcp.EmptyResult) { subscribes.Add(1) })
	hooks.AddAfterUnsubscribe(func(context.Context, any, *mcp.UnsubscribeRequest, *mcp.EmptyResult) { unsubscribes.Add(1) })
	ls := &listens{}
	hooks.AddBeforeSubscriptionsListen(ls.add)
	var rev atomic.Int64
	s.AddResource(mcp.NewResource(GreetingURI, "greeting", mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: GreetingURI, MIMEType: "text/plain", Text: GreetingText(rev.Load())}}, nil
		})
	// The demo keeps no subscription list: every connected client gets the
	// update (a client that did not subscribe ignores it).
	s.AddTool(mcp.NewTool(ToolTouchGreeting, mcp.WithDescription("Changes "+GreetingURI+" and sends notifications/resources/updated for it.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := rev.Add(1)
			// Legacy sessions (mcp-go's server keeps no subscription list)
			// and the 2026-07-28 listens that subscribed the URI (mcp-go's
			// broadcast skips listens: their notifications are opt-in).
			s.SendNotificationToAllClients(string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": GreetingURI})
			ls.updated(GreetingURI)
			return mcp.NewToolResultText(GreetingText(n)), nil
		})
	s.AddTool(mcp.NewTool(ToolListenedResources, mcp.WithDescription("The URIs the open 2026-07-28 subscriptions/listen streams subscribe, sorted, comma-separated.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strings.Join(ls.uris(), ",")), nil
		})
	s.AddTool(mcp.NewTool(ToolSubscriptionCounts, mcp.WithDescription("How many resources/subscribe and resources/unsubscribe this server answered.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(SubscriptionCounts(subscribes.Load(), unsubscribes.Load())), nil
		})
	s.AddResource(mcp.NewResource(ProgressURI, "progress", mcp.WithMIMEType("text/plain")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			reportProgress(ctx, req.Params.Meta, "read")
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: ProgressURI, MIMEType: "text/plain", Text: "progress from " + instance()}}, nil
		})
	s.AddPrompt(mcp.NewPrompt(ProgressPrompt, mcp.WithPromptDescription("Sends progress and log messages, then answers")),
		func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			reportProgress(ctx, req.Params.Meta, "prompt")
			return mcp.NewGetPromptResult("progress", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("progress from "+instance())),
			}), nil
		})
	// toggle_prompt adds the prompt ExtraPrompt, or removes it when there
	// (the server then sends notifications/prompts/list_changed).
	var extra atomic.Bool
	s.AddTool(mcp.NewTool(ToolTogglePrompt, mcp.WithDescription("Adds the prompt "+ExtraPrompt+", or removes it when listed; either way the prompts change.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if extra.CompareAndSwap(false, true) {
				s.AddPrompt(mcp.NewPrompt(ExtraPrompt, mcp.WithPromptDescription("Added at run time")),
					func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
						return mcp.NewGetPromptResult("extra", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("extra from "+instance()))}), nil
					})
				return mcp.NewToolResultText("added"), nil
			}
			extra.Store(false)
			s.DeletePrompts(ExtraPrompt)
			return mcp.NewToolResultText("removed"), nil
		})
	s.AddResource(mcp.NewResource(BlobURI, "blob", mcp.WithMIMEType("application/octet-stream")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.BlobResourceContents{URI: BlobURI, MIMEType: "application/octet-stream", Blob: base64.StdEncoding.EncodeToString(BlobBytes)}}, nil
		})
	widget := mcp.NewResource(WidgetURI, "widget", mcp.WithMIMEType(AppMIMEType))
	widget.Meta = mcp.NewMetaFromMap(WidgetMeta)
	s.AddResource(widget, func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: WidgetURI, MIMEType: AppMIMEType, Text: "<!doctype html><p>" + instance() + "</p>", Meta: WidgetMeta}}, nil
	})
	s.AddResourceTemplate(mcp.NewResourceTemplate(NoteTemplate, "note", mcp.WithTemplateMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			id := strings.TrimPrefix(req.Params.URI, "demo://notes/")
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "note " + id + " from " + instance()}}, nil
		})
	s.AddPrompt(mcp.NewPrompt("greet", mcp.WithPromptDescription("Greets someone"),
		mcp.WithArgument("name", mcp.ArgumentDescription("who to greet"), mcp.RequiredArgument())),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("a greeting", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Hello, "+req.Params.Arguments["name"]+"! ("+instance()+")")),
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: GreetingURI, MIMEType: "text/plain", Text: "hello from " + instance()})),
			}), nil
		})
	s.AddTool(mcp.NewTool("link", mcp.WithDescription("Returns a resource_link to demo://greeting and the greeting embedded.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				mcp.NewResourceLink(GreetingURI, "greeting", "", "text/plain"),
				mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: GreetingURI, MIMEType: "text/plain", Text: "hello from " + instance()}),
			}}, nil
		})
	widgetTool := mcp.NewTool("widget", mcp.WithDescription("An MCP App: its UI is "+WidgetURI+"."))
	widgetTool.Meta = mcp.NewMetaFromMap(map[string]any{"ui": map[string]any{"resourceUri": WidgetURI}})
	s.AddTool(widgetTool, func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("widget from " + instance()), nil
	})
}

// fedCompletions completes greet's name and the note template's id.
type fedCompletions struct{}

func (fedCompletions) CompletePromptArgument(_ context.Context, _ string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return prefixed(GreetNames, arg.Value), nil
}

func (fedCompletions) CompleteResourceArgument(_ context.Context, _ string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return prefixed(NoteIDs, arg.Value), nil
}

func prefixed(all []string, p string) *mcp.Completion {
	values := []string{}
	for _, v := range all {
		if strings.HasPrefix(v, p) {
			values = append(values, v)
		}
	}
	return &mcp.Completion{Values: values, Total: len(values)}
}

// ProgressPrompt is the prompt that reports progress (as ProgressURI).
const ProgressPrompt = "progress"

// reportProgress sends, for a request of kind ("read", "prompt"), two
// notifications/progress when meta has a progressToken and one log
// message per level with data "<kind> <level>" (the session's or the
// request's level decides which reach the client), then waits for them to
// be written.
func reportProgress(ctx context.Context, meta *mcp.Meta, kind string) {
	srv := server.ServerFromContext(ctx)
	if meta != nil && meta.ProgressToken != nil {
		for i := 1; i <= 2; i++ {
			_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
				"progressToken": meta.ProgressToken, "progress": i, "total": 2, "message": fmt.Sprintf("%s step %d", kind, i)})
		}
	}
	for _, l := range logLevels {
		_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(l, "demo", kind+" "+string(l)))
	}
	SettleNotifications(ctx)
}

// ToolTogglePrompt adds or removes ExtraPrompt.
const (
	ToolTogglePrompt = "toggle_prompt"
	ExtraPrompt      = "extra"
)
