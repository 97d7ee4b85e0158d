// JSON-RPC for the handshake-era MCP methods the tests need: initialize, tools/list,
// tools/call, ping; anything else with an id gets "method not found" (so the client's
// server/discover probe falls back to initialize).
export function answer(message, tools, name) {
  const { id, method, params } = message;
  if (id === undefined) return null; // a notification
  const result = (value) => ({ jsonrpc: "2.0", id, result: value });
  switch (method) {
    case "initialize":
      return result({
        protocolVersion: params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name, version: "1.0.0" },
      });
    case "ping":
      return result({});
    case "tools/list":
      return result({
        tools: Object.entries(tools).map(([toolName, tool]) => ({
          name: toolName,
          description: tool.description,
          inputSchema: tool.inputSchema,
        })),
      });
    case "tools/call": {
      const tool = tools[params.name];
      if (!tool) return { jsonrpc: "2.0", id, error: { code: -32602, message: "no such tool" } };
      return result({ content: [{ type: "text", text: tool.call(params.arguments || {}) }] });
    }
    default:
      return { jsonrpc: "2.0", id, error: { code: -32601, message: `no method ${method}` } };
  }
}
