#!/usr/bin/env node
// Peer-client check of approval for a client that declares no tasks, against the treasury example
// (`mcp-approval serve`, `[approval] without_tasks = "request"`).
//
// The MCP side is nothing but @modelcontextprotocol/client's `Client` with its default version
// negotiation and no ext-tasks: it calls wire_transfer as alice and reads ordinary CallToolResults.
// The approval-gated call answers isError with the SEP-2643 envelope `undisclosed` naming the
// approval request the server opened; calling again before the decision answers the same request;
// once carol decides (plain `fetch` against the reviewer HTTP API, the out-of-band human), the
// identical call answers the outcome once; a further identical call opens a new request.
//
// Usage: node peer_no_tasks.mjs http://127.0.0.1:PORT approve|deny
// Prints one PASS/FAIL line per check and a final "N passed, M failed" line; exits 1 on any failure.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

import { check, checkRunner, decidePendingApproval, ledgerEntries, pendingApprovalsFor, texts } from "./peer_common.mjs";

const DISPOSITION_META = "io.modelcontextprotocol/tool-approval-disposition";
const AUTHORIZATION_META = "io.modelcontextprotocol/authorization";
const CLIENT_INFO = { name: "mcp-approval-peer-no-tasks", version: "1.0.0" };
const REQUESTER_TOKEN = "alice-token";
const REVIEWER_TOKEN = "carol-token";
const AMOUNT = 30000; // above the policy's 25,000 threshold: requestable denial
const STEP_TIMEOUT_MS = 30_000;
const EXPECTED = {
  approve: { decision: "approve", disposition: "approved-executed", text: "ran once", ledger: 1, isError: false },
  deny: { decision: "deny", disposition: "denied-not-executed", text: "did not run", ledger: 0, isError: true },
};

const [baseArg, mode] = process.argv.slice(2);
if (!baseArg || !(mode in EXPECTED)) {
  console.error("usage: node peer_no_tasks.mjs <server base URL> approve|deny");
  process.exit(2);
}
const baseUrl = baseArg.replace(/\/+$/, "").replace(/\/mcp$/, "");
const serverUrl = `${baseUrl}/mcp`;
const expected = EXPECTED[mode];
const account = `notasks-${mode}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
const authorization = { Authorization: `Bearer ${REQUESTER_TOKEN}` };
const transfer = { name: "wire_transfer", arguments: { to: account, amount: AMOUNT } };

/** Check a pending answer (isError, undisclosed with a context id, no disposition); returns its reference. */
function pendingReference(result) {
  check(result.isError === true, `expected isError, got ${JSON.stringify(result)}`);
  check(result.resultType !== "task" && !result.taskId, `a task answer: ${JSON.stringify(result)}`);
  const envelope = result._meta?.[AUTHORIZATION_META];
  check(envelope?.remediation === "undisclosed", `expected undisclosed, got ${JSON.stringify(envelope)}`);
  check(envelope.authorizationContextId, "no authorizationContextId");
  check(result._meta?.[DISPOSITION_META] === undefined, "a disposition on a pending answer");
  const reference = /reference (\S+)\)/.exec(texts(result).join(" "))?.[1];
  check(reference && texts(result).join(" ").includes("did not run"), `no request named in ${JSON.stringify(texts(result))}`);
  return reference;
}

async function transfersTo(client) {
  const result = await client.callTool({ name: "ledger", arguments: {} });
  check(!result.isError, `ledger isError: ${texts(result).join(" ")}`);
  return ledgerEntries(result).filter((entry) => entry?.op === "wire_transfer" && entry?.to === account).length;
}

async function outcomeOf(client) {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    const result = await client.callTool(transfer);
    if (result._meta?.[DISPOSITION_META]) return result;
    if (Date.now() > deadline) throw new Error("no outcome for the identical call in time");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function main() {
  const { step, counts } = checkRunner(mode, STEP_TIMEOUT_MS);
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  let reference;
  let outcome;
  const ok =
    (await step("connect as alice (no ext-tasks, default version negotiation)", async () => {
      await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl), { requestInit: { headers: authorization } }));
      return `${serverUrl}, protocol ${client.getNegotiatedProtocolVersion?.() ?? "(default)"}`;
    })) &&
    (await step(`wire_transfer ${AMOUNT} to ${account} opens an approval request`, async () => {
      reference = pendingReference(await client.callTool(transfer));
      return `request ${reference}`;
    })) &&
    (await step("calling again before a decision answers the same request", async () => {
      const again = pendingReference(await client.callTool(transfer));
      check(again === reference, `a second request ${again} instead of ${reference}`);
      const pending = await pendingApprovalsFor(baseUrl, REVIEWER_TOKEN, "wire_transfer", account);
      check(pending.length === 1, `${pending.length} pending approval request(s) for ${account}`);
      return `request ${again}; 1 pending approval`;
    })) &&
    (await step("ledger while pending", async () => {
      const count = await transfersTo(client);
      check(count === 0, `${count} transfer(s) while pending`);
      return `${count} transfer(s) to ${account}`;
    })) &&
    (await step(`reviewer carol: ${expected.decision} (reviewer HTTP API)`, () =>
      decidePendingApproval({
        baseUrl,
        token: REVIEWER_TOKEN,
        tool: "wire_transfer",
        account,
        decision: expected.decision,
        comment: `peer_no_tasks.mjs ${mode}`,
        timeoutMs: STEP_TIMEOUT_MS,
      }),
    )) &&
    (await step("the identical call answers the outcome", async () => {
      outcome = await outcomeOf(client);
      const disposition = outcome._meta[DISPOSITION_META];
      check(disposition === expected.disposition, `expected ${expected.disposition}, got ${JSON.stringify(disposition)}`);
      check(Boolean(outcome.isError) === expected.isError, `expected isError ${expected.isError}, got ${outcome.isError}`);
      const body = texts(outcome).join("\n");
      check(body.includes(expected.text), `expected text containing ${JSON.stringify(expected.text)}, got ${JSON.stringify(body)}`);
      return `${DISPOSITION_META} = ${disposition}, isError ${Boolean(outcome.isError)}`;
    })) &&
    (await step("ledger after the decision", async () => {
      const count = await transfersTo(client);
      check(count === expected.ledger, `expected ${expected.ledger} transfer(s), found ${count}`);
      return `${count} transfer(s) to ${account}`;
    })) &&
    (await step("the approval is spent: a further identical call opens a new request, nothing runs", async () => {
      const next = pendingReference(await client.callTool(transfer));
      check(next !== reference, `the spent request ${reference} answered again`);
      const count = await transfersTo(client);
      check(count === expected.ledger, `expected ${expected.ledger} transfer(s), found ${count}`);
      return `new request ${next}; ${count} transfer(s)`;
    }));
  await client.close().catch(() => {});
  const { passed, failed } = counts();
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 && ok ? 0 : 1;
}

process.exitCode = await main();
