// Mastra (@mastra/mcp): `MCPClient.listTools()` tools as a Mastra agent runs them. Each call is the
// tool's `execute`; the model receives its `toModelOutput` when the tool has one (tools with an
// `outputSchema`), else the value `execute` returned, as JSON. An `isError` result is thrown (the
// default `onToolError: "throw"`), and the agent hands the model the error's message.

import { MCPClient } from "@mastra/mcp";

import { Leg, REQUESTER_TOKEN, approvalFlow } from "./harness.mjs";

const leg = new Leg("@mastra/mcp");
const client = new MCPClient({
  id: "interop-mastra",
  servers: {
    treasury: {
      url: new URL(leg.mcpUrl),
      requestInit: { headers: { Authorization: `Bearer ${REQUESTER_TOKEN}` } },
      logger: () => {}, // it logs every error answer with a stack
    },
  },
});
const tools = await client.listTools();
let ids = 0;

async function modelText(tool, output) {
  if (typeof tool.toModelOutput !== "function") return JSON.stringify(output);
  const shown = await tool.toModelOutput(output);
  if (shown?.type === "text") return shown.value;
  if (shown?.type === "content") return shown.value.map((part) => part.text ?? JSON.stringify(part)).join("\n");
  return JSON.stringify(shown?.value ?? shown);
}

async function call(name, args) {
  const tool = tools[`treasury_${name}`];
  let output;
  try {
    output = await tool.execute(args, { runId: `run-${++ids}` });
  } catch (error) {
    return `[error] ${error?.message ?? error}`;
  }
  return modelText(tool, output);
}

try {
  await approvalFlow(leg, call);
} finally {
  await client.disconnect();
}
process.exitCode = leg.finish();
