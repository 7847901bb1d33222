// Connect your account from an MCP client: the official TypeScript SDK
// client, declaring URL-mode elicitation, calls a tool of a server the
// user has not connected, gets the URL elicitation (-32042,
// UrlElicitationRequiredError), prints it as one JSON line and waits for a
// line on stdin (the person has followed the URL and signed in), then
// calls again and prints the result as one JSON line. The Go test
// TestConnectFromTheTypeScriptSDK drives it.
//
// Usage: MCP_SDK_DIR=<node_modules/@modelcontextprotocol/sdk> MCPBUS_KEY=<key> node sdk_connect.mjs <url> <tool>
import readline from "node:readline";

const sdk = process.env.MCP_SDK_DIR;
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);
const { UrlElicitationRequiredError } = await import(`${sdk}/dist/esm/types.js`);

const [url, tool] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCPBUS_KEY}` } },
});
const client = new Client({ name: "mcpbus-sdk-connect", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
await client.connect(transport);

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const first = await client.callTool({ name: tool, arguments: {} }).then(
  (r) => ({ result: r }),
  (e) => ({ error: e }),
);
if (!(first.error instanceof UrlElicitationRequiredError)) {
  console.log(JSON.stringify({ unexpected: first.result ?? String(first.error) }));
  process.exit(1);
}
const el = first.error.elicitations;
console.log(JSON.stringify({ elicitations: el, message: first.error.message }));
await lines.next(); // the person is back
const second = await client.callTool({ name: tool, arguments: {} });
console.log(JSON.stringify({ result: second }));
await client.close();
process.exit(0);
