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

import {
  check,
  checkRunner,
  decidePendingApproval,
  ledgerEntries,
  makeRawDispatch,
  texts,
} from "./peer_common.mjs";

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
// The out-of-band human: carol on the reviewer HTTP API (peer_common.mjs; plain fetch, not client library code).

function decideAsReviewer() {
  return decidePendingApproval({
    baseUrl,
    token: REVIEWER_TOKEN,
    tool: "wire_transfer",
    account,
    decision: expected.decision,
    comment: `peer_approval.mjs ${mode}`,
    timeoutMs: STEP_TIMEOUT_MS,
  });
}

// ---------------------------------------------------------------------------------------------
// Checks

async function main() {
  const { step, counts } = checkRunner(mode, STEP_TIMEOUT_MS);

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
  const { passed, failed } = counts();
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 && ok ? 0 : 1;
}

process.exitCode = await main();
