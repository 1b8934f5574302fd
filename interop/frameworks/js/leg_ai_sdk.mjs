// The AI SDK's MCP client (@ai-sdk/mcp): `createMCPClient(...).tools()` as `generateText` runs them.
// Each call is the tool's `execute` with a tool call id, and its `toModelOutput` turns the result into
// what the model receives (the content blocks as text parts).

import { createMCPClient } from "@ai-sdk/mcp";

import { Leg, REQUESTER_TOKEN, approvalFlow } from "./harness.mjs";

const leg = new Leg("@ai-sdk/mcp");
const client = await createMCPClient({
  transport: { type: "http", url: leg.mcpUrl, headers: { Authorization: `Bearer ${REQUESTER_TOKEN}` } },
});
const tools = await client.tools();
let ids = 0;

/** The model output of one tool call: text parts joined, other parts as JSON. */
function modelText(output) {
  if (output.type === "text") return output.value;
  if (output.type === "content") return output.value.map((part) => part.text ?? JSON.stringify(part)).join("\n");
  return JSON.stringify(output.value);
}

async function call(name, args) {
  const tool = tools[name];
  const toolCallId = `call-${++ids}`;
  const output = await tool.execute(args, { toolCallId, messages: [] });
  return modelText(await tool.toModelOutput({ toolCallId, input: args, output }));
}

try {
  await approvalFlow(leg, call);
} finally {
  await client.close();
}
process.exitCode = leg.finish();
