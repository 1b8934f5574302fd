#!/usr/bin/env node
// The TypeScript SDK client (@modelcontextprotocol/client + @modelcontextprotocol/ext-tasks) against
// `mcp-approval check-client`: it calls the harness's gated `transfer` tool, answers the task's
// input request through the ext-tasks session, and settles the task. The harness judges what it did.
//
// Usage: node peer_check_client.mjs http://127.0.0.1:PORT/mcp
// Prints the outcome; exits 1 if the call did not complete.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

import { makeRawDispatch } from "./peer_common.mjs";

const PROTOCOL_VERSION = "2026-07-28";
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const CLIENT_INFO = { name: "mcp-approval-peer-check-client", version: "1.0.0" };
const CLIENT_CAPABILITIES = { extensions: { [TASKS_EXTENSION]: {} }, elicitation: { form: {} } };

const [serverUrl] = process.argv.slice(2);
if (!serverUrl) {
  console.error("usage: node peer_check_client.mjs <harness /mcp URL>");
  process.exit(2);
}

async function onInputRequest(request) {
  if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} input request`);
  return { action: "accept", content: { justification: "peer_check_client.mjs" } };
}

async function main() {
  const client = new Client(CLIENT_INFO, {
    capabilities: { elicitation: { form: {} } },
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl)));
  const session = createTaskSessionFromClient(client, {
    endpointId: `mcp-approval-peer-check-client:${serverUrl}`,
    rawDispatch: makeRawDispatch({ serverUrl, protocolVersion: PROTOCOL_VERSION }),
    v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo: CLIENT_INFO, clientCapabilities: CLIENT_CAPABILITIES },
    onInputRequest,
  });
  const execution = await session.callTool("transfer", { to: "acct-ts", amount: 100 });
  if (execution.kind !== "task") throw new Error(`expected a task, got ${execution.kind}`);
  const { outcome } = await execution.settle();
  console.log(`task ${execution.handle.taskId}: ${outcome.status}${outcome.error ? ` (${outcome.error.message})` : ""}`);
  await client.close();
  return outcome.status === "completed" ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`peer_check_client.mjs: ${error?.stack ?? error}`);
    process.exit(1);
  },
);
