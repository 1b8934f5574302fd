#!/usr/bin/env node
// Peer-client check of tool approval (SEP-2848) against the treasury example (`mcp-approval serve`).
//
// SEP-2848's interop claim: a client built only on io.modelcontextprotocol/tasks interoperates
// with an approval-gated tool, with no approval-specific client code. The MCP side below is
// nothing but @modelcontextprotocol/client + @modelcontextprotocol/ext-tasks (the same session
// setup as peer_tasks.mjs), connected as alice. The reviewer decision is made with plain `fetch`
// against the reviewer HTTP API as carol: it stands in for the out-of-band human and is not
// client library code.
//
// Usage: node peer_approval.mjs http://127.0.0.1:PORT approve|deny
// Prints one PASS/FAIL line per check and a final "N passed, M failed" line; exits 1 on any failure.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

import { makeRawDispatch, withTimeout } from "./peer_common.mjs";

const PROTOCOL_VERSION = "2026-07-28";
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const DISPOSITION_META = "io.modelcontextprotocol/tool-approval-disposition";
const CLIENT_INFO = { name: "mcp-approval-peer-approval", version: "1.0.0" };
const CLIENT_CAPABILITIES = { extensions: { [TASKS_EXTENSION]: {} } };
const REQUESTER_TOKEN = "alice-token";
const REVIEWER_TOKEN = "carol-token";
const AMOUNT = 30000; // above the policy's 25,000 threshold: requestable denial -> task
const STEP_TIMEOUT_MS = 30_000;
const EXPECTED = {
  approve: { decision: "approve", disposition: "approved-executed", text: "ran once", ledger: 1, isError: false },
  deny: { decision: "deny", disposition: "denied-not-executed", text: "did not run", ledger: 0, isError: true },
};

const [baseArg, mode] = process.argv.slice(2);
if (!baseArg || !(mode in EXPECTED)) {
  console.error("usage: node peer_approval.mjs <server base URL> approve|deny");
  process.exit(2);
}
const baseUrl = baseArg.replace(/\/+$/, "").replace(/\/mcp$/, "");
const serverUrl = `${baseUrl}/mcp`;
const expected = EXPECTED[mode];
const account = `peer-${mode}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
const authorization = { Authorization: `Bearer ${REQUESTER_TOKEN}` };

// ---------------------------------------------------------------------------------------------
// Raw 2026-07-28 dispatch (peer_common.mjs, shared with peer_tasks.mjs), carrying alice's bearer token.

const rawDispatch = makeRawDispatch({ serverUrl, protocolVersion: PROTOCOL_VERSION, extraHeaders: authorization });

async function onInputRequest(request) {
  throw new Error(`unexpected ${request.kind} input request: the treasury template asks for no inputs`);
}

async function connect() {
  const client = new Client(CLIENT_INFO, {
    capabilities: {},
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl), { requestInit: { headers: authorization } }));
  const advertised = client.getServerCapabilities()?.extensions?.[TASKS_EXTENSION];
  check(advertised !== undefined, `server does not advertise ${TASKS_EXTENSION}`);
  const session = createTaskSessionFromClient(client, {
    endpointId: `mcp-approval-peer-approval:${serverUrl}`,
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

// ---------------------------------------------------------------------------------------------
// The out-of-band human: carol on the reviewer HTTP API (plain fetch, not client library code).

async function reviewer(method, path, body) {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${REVIEWER_TOKEN}`,
      ...(body ? { "Content-Type": "application/json" } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

async function decideAsReviewer() {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    const { approvals } = await reviewer("GET", "/approvals?status=pending");
    const mine = approvals.filter((record) => record.tool === "wire_transfer" && record.arguments?.to === account);
    if (mine.length > 1) throw new Error(`${mine.length} pending approvals for ${account}, expected one`);
    if (mine.length === 1) {
      const record = await reviewer("POST", `/approvals/${encodeURIComponent(mine[0].id)}/decide`, {
        decision: expected.decision,
        comment: `peer_approval.mjs ${mode}`,
      });
      return `${record.id} -> ${record.status}`;
    }
    if (Date.now() > deadline) throw new Error(`no pending approval for ${account} after ${STEP_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// ---------------------------------------------------------------------------------------------
// Checks

function check(condition, message) {
  if (!condition) throw new Error(message);
}

function texts(result) {
  return (result?.content ?? []).filter((block) => block.type === "text").map((block) => block.text);
}

function ledgerEntries(result) {
  const structured = result?.structuredContent;
  if (Array.isArray(structured?.result)) return structured.result;
  if (Array.isArray(structured)) return structured;
  const entries = [];
  for (const text of texts(result)) {
    const parsed = JSON.parse(text);
    if (Array.isArray(parsed)) entries.push(...parsed);
    else entries.push(parsed);
  }
  return entries;
}

async function main() {
  let passed = 0;
  let failed = 0;
  const step = async (name, run) => {
    try {
      const detail = await withTimeout(run(), STEP_TIMEOUT_MS);
      passed += 1;
      console.log(`PASS [${mode}] ${name}: ${detail}`);
      return true;
    } catch (error) {
      failed += 1;
      console.log(`FAIL [${mode}] ${name}: ${error?.message ?? error}`);
      return false;
    }
  };

  let connection;
  let execution;
  let outcome;
  const ok =
    (await step("connect as alice (ext-tasks session)", async () => {
      connection = await connect();
      return `${serverUrl}, ${TASKS_EXTENSION} advertised`;
    })) &&
    (await step(`wire_transfer ${AMOUNT} to ${account} becomes a task`, async () => {
      execution = await connection.session.callTool("wire_transfer", { to: account, amount: AMOUNT });
      check(execution.kind === "task", `expected a task execution, got ${execution.kind}`);
      return `task ${execution.handle.taskId}`;
    })) &&
    (await step(`reviewer carol: ${expected.decision} (reviewer HTTP API)`, decideAsReviewer)) &&
    (await step("task settles through ext-tasks", async () => {
      ({ outcome } = await execution.settle());
      check(outcome.status === "completed", `expected completed, got ${outcome.status} ${outcome.error?.message ?? ""}`);
      return `status ${outcome.status}`;
    }));
  if (ok) {
    await step("disposition", async () => {
      const disposition = outcome.result?._meta?.[DISPOSITION_META];
      check(disposition === expected.disposition, `expected ${expected.disposition}, got ${JSON.stringify(disposition)}`);
      check(
        Boolean(outcome.result.isError) === expected.isError,
        `expected isError ${expected.isError}, got ${JSON.stringify(outcome.result.isError)}`,
      );
      return `${DISPOSITION_META} = ${disposition}, isError ${Boolean(outcome.result.isError)}`;
    });
    await step("body text", async () => {
      const body = texts(outcome.result).join("\n");
      check(body.includes(expected.text), `expected text containing ${JSON.stringify(expected.text)}, got ${JSON.stringify(body)}`);
      return JSON.stringify(body);
    });
  }
  if (connection) {
    await step("ledger", async () => {
      const ledger = await connection.session.callTool("ledger", {});
      const { outcome: ledgerOutcome } = await ledger.settle();
      check(ledgerOutcome.status === "completed", `ledger call ended ${ledgerOutcome.status}`);
      check(!ledgerOutcome.result.isError, `ledger isError: ${texts(ledgerOutcome.result).join(" ")}`);
      const transfers = ledgerEntries(ledgerOutcome.result).filter(
        (entry) => entry?.op === "wire_transfer" && entry?.to === account,
      );
      check(transfers.length === expected.ledger, `expected ${expected.ledger} transfer(s) to ${account}, found ${transfers.length}`);
      return `${transfers.length} transfer(s) to ${account} (${ledger.kind} call)`;
    });
    await connection.session.close().catch(() => {});
    await connection.client.close().catch(() => {});
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 && ok ? 0 : 1;
}

process.exitCode = await main();
