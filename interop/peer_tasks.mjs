#!/usr/bin/env node
// Peer-client check of the tasks extension (SEP-2663) served by `mcp-approval conformance-server`.
//
// An independent requester, @modelcontextprotocol/ext-tasks on @modelcontextprotocol/client
// (2026-07-28 wire), drives the fixture tools through every task outcome and checks each one.
//
// Usage: node peer_tasks.mjs http://127.0.0.1:PORT/mcp
// Prints one PASS/FAIL line per case and a final "N passed, M failed" line; exits 1 on any failure.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

import { makeRawDispatch, withTimeout } from "./peer_common.mjs";

const PROTOCOL_VERSION = "2026-07-28";
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const CLIENT_INFO = { name: "mcp-approval-peer-tasks", version: "1.0.0" };
const CLIENT_CAPABILITIES = { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } };
const CASE_TIMEOUT_MS = 20_000;
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

const serverUrl = process.argv[2];
if (!serverUrl) {
  console.error("usage: node peer_tasks.mjs <server /mcp URL>");
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Raw 2026-07-28 dispatch: ext-tasks frames the request, we only carry it over HTTP.

const rawDispatch = makeRawDispatch({ serverUrl, protocolVersion: PROTOCOL_VERSION });

// ---------------------------------------------------------------------------------------------
// Input: answer every elicitation by filling the requested form.

const answeredInputs = new Map(); // taskId -> number of input requests answered

function fillForm(schema) {
  const content = {};
  for (const [key, property] of Object.entries(schema?.properties ?? {})) {
    if (property.type === "boolean") content[key] = true;
    else if (property.type === "number" || property.type === "integer") content[key] = 1;
    else content[key] = `peer-${key}`;
  }
  return content;
}

async function onInputRequest(request, context) {
  answeredInputs.set(context.taskId, (answeredInputs.get(context.taskId) ?? 0) + 1);
  if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} input request`);
  return { action: "accept", content: fillForm(request.params.requestedSchema) };
}

// ---------------------------------------------------------------------------------------------
// Cases

function check(condition, message) {
  if (!condition) throw new Error(message);
}

function firstText(result) {
  return result?.content?.find((block) => block.type === "text")?.text ?? "";
}

async function settled(session, tool, args, expectedKind) {
  const execution = await session.callTool(tool, args);
  check(execution.kind === expectedKind, `expected a ${expectedKind} execution, got ${execution.kind}`);
  const { outcome } = await execution.settle();
  return { execution, outcome };
}

async function completedText(session, tool, args, expectedKind) {
  const { execution, outcome } = await settled(session, tool, args, expectedKind);
  check(outcome.status === "completed", `expected completed, got ${outcome.status} ${outcome.error?.message ?? ""}`);
  check(!outcome.result.isError, `unexpected isError result: ${firstText(outcome.result)}`);
  return { execution, text: firstText(outcome.result) };
}

async function waitForTerminal(session, taskId) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const view = await session.task(taskId).snapshot();
    if (TERMINAL.has(view.status) || Date.now() > deadline) return view;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const CASES = {
  async "sync (greet)"(session) {
    const { text } = await completedText(session, "greet", { name: "Peer" }, "immediate");
    check(text === "Hello, Peer!", `unexpected text ${JSON.stringify(text)}`);
    return text;
  },
  async "task (slow_compute)"(session) {
    const { text } = await completedText(session, "slow_compute", { seconds: 1.5, label: "peer" }, "task");
    check(text.includes("peer"), `unexpected text ${JSON.stringify(text)}`);
    return text;
  },
  async "tool error (failing_job -> completed + isError)"(session) {
    const { outcome } = await settled(session, "failing_job", {}, "task");
    check(outcome.status === "completed", `expected completed, got ${outcome.status}`);
    check(outcome.result.isError === true, "expected result.isError true");
    return firstText(outcome.result);
  },
  async "protocol error (protocol_error_job -> failed)"(session) {
    const { outcome } = await settled(session, "protocol_error_job", {}, "task");
    check(outcome.status === "failed", `expected failed, got ${outcome.status}`);
    check(typeof outcome.error?.code === "number", "expected a numeric JSON-RPC error code");
    return `code ${outcome.error.code}: ${outcome.error.message}`;
  },
  async "input, one request (confirm_delete)"(session) {
    const { execution, text } = await completedText(session, "confirm_delete", { filename: "peer.txt" }, "task");
    const answered = answeredInputs.get(execution.handle.taskId) ?? 0;
    check(answered === 1, `expected 1 answered input request, got ${answered}`);
    check(text === "Deleted peer.txt", `unexpected text ${JSON.stringify(text)}`);
    return `${text} after ${answered} tasks/update answer`;
  },
  async "input, two requests (multi_input)"(session) {
    const { execution, text } = await completedText(session, "multi_input", {}, "task");
    const answered = answeredInputs.get(execution.handle.taskId) ?? 0;
    check(answered === 2, `expected 2 answered input requests, got ${answered}`);
    return `${text} after ${answered} answers`;
  },
  async "cancel (slow_compute cancelled mid-run)"(session) {
    const execution = await session.callTool("slow_compute", { seconds: 30, label: "cancel-me" });
    check(execution.kind === "task", `expected a task execution, got ${execution.kind}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await execution.cancel();
    const view = await waitForTerminal(session, execution.handle.taskId);
    check(view.status === "cancelled", `expected cancelled, got ${view.status}`);
    return `task ${execution.handle.taskId.slice(0, 8)}… ${view.status}`;
  },
};

async function connect() {
  const client = new Client(CLIENT_INFO, {
    capabilities: { elicitation: { form: {} } },
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl)));
  const advertised = client.getServerCapabilities()?.extensions?.[TASKS_EXTENSION];
  check(advertised !== undefined, `server does not advertise ${TASKS_EXTENSION}`);
  const session = createTaskSessionFromClient(client, {
    endpointId: `mcp-approval-peer:${serverUrl}`,
    rawDispatch,
    v2RequestFraming: {
      protocolVersion: PROTOCOL_VERSION,
      clientInfo: CLIENT_INFO,
      clientCapabilities: CLIENT_CAPABILITIES,
    },
    onInputRequest,
  });
  return { client, session };
}

async function main() {
  let passed = 0;
  let failed = 0;
  let connection;
  try {
    connection = await connect();
  } catch (error) {
    console.log(`FAIL connect: ${error?.message ?? error}`);
    console.log(`0 passed, ${Object.keys(CASES).length} failed`);
    return 1;
  }
  for (const [name, run] of Object.entries(CASES)) {
    try {
      const detail = await withTimeout(run(connection.session), CASE_TIMEOUT_MS);
      passed += 1;
      console.log(`PASS ${name}: ${detail}`);
    } catch (error) {
      failed += 1;
      console.log(`FAIL ${name}: ${error?.message ?? error}`);
    }
  }
  await connection.session.close().catch(() => {});
  await connection.client.close().catch(() => {});
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main();
