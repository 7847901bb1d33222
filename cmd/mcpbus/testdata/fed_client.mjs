// Drives mcpbus's federation with the official TypeScript SDK client (the
// Go test TestFederationWithTheTypeScriptSDK runs it) over /mcp
// (streamable HTTP) or /sse (the 2024-11-05 transport): lists resources,
// templates and prompts, reads resources (text, blob, a template
// expansion, an MCP Apps ui:// resource named by a tool's _meta), gets a
// prompt with arguments, completes arguments, follows a resource_link a
// tool returned, and tries forged and denied URIs. Prints one JSON object
// with what it saw.
//
// Usage: MCP_SDK_DIR=<sdk dir> MCPBUS_KEY=<key> node fed_client.mjs <url> streamable|sse
const sdk = process.env.MCP_SDK_DIR;
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { sdkTransport } = await import("./sdk_transport.mjs");
const transport = await sdkTransport(sdk, process.argv[2], process.argv[3], process.env.MCPBUS_KEY);
const client = new Client({ name: "mcpbus-fed-test", version: "1.0.0" });
await client.connect(transport);
const out = { capabilities: client.getServerCapabilities() };

const all = async (fn, key) => {
  const items = [];
  let cursor;
  do {
    const page = await fn(cursor ? { cursor } : {});
    items.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
};
const resources = await all((p) => client.listResources(p), "resources");
const templates = await all((p) => client.listResourceTemplates(p), "resourceTemplates");
const prompts = await all((p) => client.listPrompts(p), "prompts");
out.resources = resources.map((r) => r.uri);
out.templates = templates.map((t) => t.uriTemplate);
out.prompts = prompts.map((p) => p.name);

const error = async (fn) => {
  try {
    await fn();
    return null;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
};
const text = (r) => r.contents.map((c) => c.text ?? "").join("");
out.readA = text(await client.readResource({ uri: "mcpbus://a/demo://greeting" }));
out.readB = text(await client.readResource({ uri: "mcpbus://b/demo://greeting" }));
const blob = (await client.readResource({ uri: "mcpbus://a/demo://blob" })).contents[0];
out.blob = { uri: blob.uri, blob: blob.blob, mimeType: blob.mimeType };
out.note = text(await client.readResource({ uri: "mcpbus://a/demo://notes/7" }));

const tools = await all((p) => client.listTools(p), "tools");
const widgetTool = tools.find((t) => t.name === "a_widget");
out.widgetResourceUri = widgetTool?._meta?.ui?.resourceUri ?? null;
if (out.widgetResourceUri) {
  const w = (await client.readResource({ uri: out.widgetResourceUri })).contents[0];
  out.widget = { uri: w.uri, mimeType: w.mimeType, meta: w._meta ?? null, text: w.text };
}
const widgetListed = resources.find((r) => r.uri === "ui://a/widget/app.html");
out.widgetListedMime = widgetListed?.mimeType ?? null;

const prompt = await client.getPrompt({ name: "a_greet", arguments: { name: "Paris" } });
out.prompt = prompt.messages.map((m) => (m.content.type === "text" ? m.content.text : m.content.type === "resource" ? m.content.resource.uri : m.content.type));
out.completePrompt = (await client.complete({ ref: { type: "ref/prompt", name: "a_greet" }, argument: { name: "name", value: "Al" } })).completion.values;
out.completeTemplate = (await client.complete({ ref: { type: "ref/resource", uri: "mcpbus://a/demo://notes/{id}" }, argument: { name: "id", value: "alp" } })).completion.values;

const linked = await client.callTool({ name: "a_link", arguments: {} });
const link = linked.content.find((c) => c.type === "resource_link");
out.link = link?.uri ?? null;
out.embedded = linked.content.find((c) => c.type === "resource")?.resource?.uri ?? null;
if (link) out.linkRead = text(await client.readResource({ uri: link.uri }));

// server-everything, federated as "everything".
const ev = resources.filter((r) => r.uri.startsWith("mcpbus://everything/"));
out.everythingResources = ev.length;
if (ev.length) {
  const c = (await client.readResource({ uri: ev[0].uri })).contents[0];
  out.everythingRead = { uri: c.uri, listed: ev[0].uri, hasBody: Boolean(c.text || c.blob) };
}
const evArgs = prompts.find((p) => p.name.startsWith("everything_") && p.name.includes("args"));
if (evArgs) {
  const args = {};
  for (const a of evArgs.arguments ?? []) if (a.required) args[a.name] = "Paris";
  const r = await client.getPrompt({ name: evArgs.name, arguments: args });
  out.everythingPrompt = { name: evArgs.name, text: r.messages.map((m) => m.content.text ?? "").join(" ") };
}
const evLinks = tools.find((t) => t.name === "everything_get-resource-links");
out.everythingTools = tools.filter((t) => t.name.startsWith("everything_")).map((t) => t.name);
if (evLinks) {
  const r = await client.callTool({ name: evLinks.name, arguments: { count: 1 } });
  const l = r.content.find((c) => c.type === "resource_link");
  if (l) {
    const c = (await client.readResource({ uri: l.uri })).contents[0];
    out.everythingLink = { uri: l.uri, read: c.uri, hasBody: Boolean(c.text || c.blob) };
  }
}

// Attacks: a server that is not the caller's, a URI in neither form, a
// guardrail-denied server.
out.forged = await error(() => client.readResource({ uri: "mcpbus://nosuch/demo://greeting?token=s3cret" }));
out.notMapped = await error(() => client.readResource({ uri: "file:///etc/passwd" }));
out.denied = await error(() => client.readResource({ uri: "mcpbus://secret/demo://greeting" }));
out.deniedPrompt = await error(() => client.getPrompt({ name: "secret_greet", arguments: { name: "x" } }));
out.unknownPrompt = await error(() => client.getPrompt({ name: "nosuch_prompt" }));
await client.close();
console.log(JSON.stringify(out));
