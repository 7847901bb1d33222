// The TypeScript SDK client transport the federation test drivers
// (fed_client.mjs, sub_client.mjs) use: streamable HTTP, or the 2024-11-05
// SSE transport when kind is "sse", both sending the mcpbus key.
export async function sdkTransport(sdk, url, kind, key) {
  const headers = { Authorization: `Bearer ${key}` };
  if (kind === "sse") {
    const { SSEClientTransport } = await import(`${sdk}/dist/esm/client/sse.js`);
    return new SSEClientTransport(new URL(url), {
      requestInit: { headers },
      eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers ?? {}), ...headers } }) },
    });
  }
  const { StreamableHTTPClientTransport } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);
  return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}
