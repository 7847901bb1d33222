// Drives mcpbus's /mcp with the official TypeScript SDK client (the Go test
// TestMCPWithTheTypeScriptSDK runs it): initialize, tools/list page by
// page, a stdio and an HTTP upstream call, progress, and a call cancelled
// with an AbortSignal (the SDK sends notifications/cancelled). Prints one
// JSON object with what it saw.
//
// Usage: MCP_SDK_DIR=<node_modules/@modelcontextprotocol/sdk> MCPBUS_KEY=<key> node sdk_client.mjs <url>
const sdk = process.env.MCP_SDK_DIR;
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);

const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCPBUS_KEY}` } },
});
const client = new Client({ name: "mcpbus-sdk-test", version: "1.0.0" });
await client.connect(transport);
const out = { server: client.getServerVersion(), protocol: transport.protocolVersion, sessionId: transport.sessionId !== undefined };

const tools = [];
let cursor;
let pages = 0;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
  pages++;
} while (cursor && pages < 100);
out.tools = tools;
out.pages = pages;

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
out.echo = text(await client.callTool({ name: "demo_echo", arguments: { message: "from the sdk" } }));
out.add = (await client.callTool({ name: "demohttp_add", arguments: { a: 2, b: 5 } })).structuredContent;

const progress = [];
const pr = await client.callTool({ name: "demohttp_progress", arguments: { steps: 3 } }, undefined, {
  onprogress: (p) => progress.push(p.progress),
});
out.progress = progress;
out.progressMeta = pr._meta ?? null;

// Cancel a call once the upstream runs it.
const counts = async () => (await client.callTool({ name: "demohttp_cancellations", arguments: {} })).structuredContent;
const deadline = Date.now() + 60000;
const waitFor = async (cond) => {
  for (;;) {
    const c = await counts();
    if (cond(c)) return c;
    if (Date.now() > deadline) throw new Error(`timed out; last counts ${JSON.stringify(c)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};
const before = await counts();
const ac = new AbortController();
const blocked = client
  .callTool({ name: "demohttp_block", arguments: {} }, undefined, { signal: ac.signal, timeout: 120000 })
  .then(() => "resolved", () => "rejected");
await waitFor((c) => c.in_flight > before.in_flight);
ac.abort("the test cancels");
out.blocked = await blocked;
// The HTTP upstream speaks 2026-07-28: the aborted POST is its
// cancellation, with no notifications/cancelled.
const after = await waitFor((c) => c.blocked_cancelled > before.blocked_cancelled);
out.cancelled = after.blocked_cancelled - before.blocked_cancelled;
out.upstreamNotified = after.cancel_notifications - before.cancel_notifications;

await client.close();
console.log(JSON.stringify(out));
