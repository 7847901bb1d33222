package demo

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The conformance fixture's resources, prompts and completions, written
// from the resources-*, prompts-* and completion-complete scenarios. They
// are the direct reference only: mcpbus aggregates tools, so through it
// these scenarios answer "method not found".

// addResources registers test://static-text, test://static-binary,
// test://watched-resource (for resources/subscribe) and the template
// test://template/{id}/data.
func addResources(s *server.MCPServer) {
	s.AddResource(mcp.NewResource("test://static-text", "Static text resource",
		mcp.WithResourceDescription("A fixed text resource"), mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://static-text", MIMEType: "text/plain",
				Text: "This is the content of the static text resource."}}, nil
		})
	s.AddResource(mcp.NewResource("test://static-binary", "Static binary resource",
		mcp.WithResourceDescription("A 1x1 PNG image"), mcp.WithMIMEType("image/png")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.BlobResourceContents{URI: "test://static-binary", MIMEType: "image/png", Blob: redPixelPNG}}, nil
		})
	s.AddResource(mcp.NewResource("test://watched-resource", "Watched resource",
		mcp.WithResourceDescription("A resource to subscribe to"), mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://watched-resource", MIMEType: "text/plain", Text: "Watched resource content."}}, nil
		})
	s.AddResourceTemplate(mcp.NewResourceTemplate("test://template/{id}/data", "Template resource",
		mcp.WithTemplateDescription("Data for an id"), mcp.WithTemplateMIMEType("application/json")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			data, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(data)}}, nil
		})
}

// addPrompts registers test_simple_prompt, test_prompt_with_arguments,
// test_prompt_with_embedded_resource and test_prompt_with_image.
func addPrompts(s *server.MCPServer) {
	user := func(c mcp.Content) mcp.PromptMessage { return mcp.NewPromptMessage(mcp.RoleUser, c) }
	s.AddPrompt(mcp.NewPrompt("test_simple_prompt", mcp.WithPromptDescription("A prompt without arguments")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("A simple prompt", []mcp.PromptMessage{user(mcp.NewTextContent("This is a simple prompt for testing."))}), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_arguments", mcp.WithPromptDescription("A prompt with two arguments"),
		mcp.WithArgument("arg1", mcp.ArgumentDescription("First test argument"), mcp.RequiredArgument()),
		mcp.WithArgument("arg2", mcp.ArgumentDescription("Second test argument"), mcp.RequiredArgument())),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return mcp.NewGetPromptResult("A prompt with arguments", []mcp.PromptMessage{
				user(mcp.NewTextContent("Prompt with arguments: arg1='" + a["arg1"] + "', arg2='" + a["arg2"] + "'"))}), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_embedded_resource", mcp.WithPromptDescription("A prompt embedding a resource"),
		mcp.WithArgument("resourceUri", mcp.ArgumentDescription("URI of the resource to embed"), mcp.RequiredArgument())),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("A prompt with an embedded resource", []mcp.PromptMessage{
				user(mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain",
					Text: "Embedded resource content for testing."})),
				user(mcp.NewTextContent("Please process the embedded resource above.")),
			}), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_image", mcp.WithPromptDescription("A prompt with an image")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("A prompt with an image", []mcp.PromptMessage{
				user(mcp.NewImageContent(redPixelPNG, "image/png")),
				user(mcp.NewTextContent("Please analyze the image above.")),
			}), nil
		})
}

// completions completes test_prompt_with_arguments' arguments from a fixed
// list (completion-complete: the values may be minimal, the shape not).
type completions struct{}

func (completions) CompletePromptArgument(_ context.Context, _ string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	values := []string{}
	for _, v := range []string{"paris", "park", "party", "test", "testing"} {
		if strings.HasPrefix(v, arg.Value) {
			values = append(values, v)
		}
	}
	return &mcp.Completion{Values: values, Total: len(values)}, nil
}
