// A TypeScript SDK client over /mcp (streamable HTTP, a 2025-11-25
// session) or /sse (the 2024-11-05 transport) driven line by line on stdin, for the resource subscription
// tests (TestResourceSubscriptionsAcrossReplicas): "subscribe <uri>",
// "unsubscribe <uri>", "close". It prints one JSON object per line: ready
// (with the server's capabilities), subscribed / unsubscribed, error (code
// and message of a refused request) and updated (the uri of every
// notifications/resources/updated).
//
// Usage: MCP_SDK_DIR=<sdk dir> MCPBUS_KEY=<key> node sub_client.mjs <url> [sse]
import readline from "node:readline";

const sdk = process.env.MCP_SDK_DIR;
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { ResourceUpdatedNotificationSchema } = await import(`${sdk}/dist/esm/types.js`);
const print = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const { sdkTransport } = await import("./sdk_transport.mjs");
const transport = await sdkTransport(sdk, process.argv[2], process.argv[3], process.env.MCPBUS_KEY);
const client = new Client({ name: "mcpbus-sub-test", version: "1.0.0" });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => print({ event: "updated", uri: n.params.uri }));
await client.connect(transport);
print({ event: "ready", capabilities: client.getServerCapabilities() });
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [cmd, uri] = line.split(" ");
  try {
    if (cmd === "subscribe") {
      await client.subscribeResource({ uri });
      print({ event: "subscribed", uri });
    } else if (cmd === "unsubscribe") {
      await client.unsubscribeResource({ uri });
      print({ event: "unsubscribed", uri });
    } else if (cmd === "close") {
      await client.close();
      break;
    }
  } catch (e) {
    print({ event: "error", uri, code: e.code, message: e.message });
  }
}
process.exit(0);
