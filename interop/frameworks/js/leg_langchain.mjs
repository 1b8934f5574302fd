// @langchain/mcp-adapters with LangGraph JS: `MultiServerMCPClient` tools run by a `ToolNode` in a
// one-node `StateGraph`, as a LangGraph agent's tool step runs a tool call; the `ToolMessage` it
// returns is what the model receives next.

import { AIMessage } from "@langchain/core/messages";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { MultiServerMCPClient } from "@langchain/mcp-adapters";

import { Leg, REQUESTER_TOKEN, approvalFlow } from "./harness.mjs";

const leg = new Leg("@langchain/mcp-adapters");
const client = new MultiServerMCPClient({
  mcpServers: {
    treasury: { transport: "http", url: leg.mcpUrl, headers: { Authorization: `Bearer ${REQUESTER_TOKEN}` } },
  },
});
const graph = new StateGraph(MessagesAnnotation)
  .addNode("tools", new ToolNode(await client.getTools()))
  .addEdge(START, "tools")
  .addEdge("tools", END)
  .compile();
let ids = 0;

/** A ToolMessage's content as the model reads it (text blocks joined; other blocks as JSON). */
function messageText(message) {
  if (typeof message.content === "string") return message.content;
  return message.content.map((block) => (block.type === "text" ? block.text : JSON.stringify(block))).join("\n");
}

async function call(name, args) {
  const request = new AIMessage({ content: "", tool_calls: [{ name, args, id: `call-${++ids}`, type: "tool_call" }] });
  const { messages } = await graph.invoke({ messages: [request] });
  const message = messages.at(-1);
  return `[status=${message.status ?? "success"}] ${messageText(message)}`;
}

try {
  await approvalFlow(leg, call);
} finally {
  await client.close();
}
process.exitCode = leg.finish();
