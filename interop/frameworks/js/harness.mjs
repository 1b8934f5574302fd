// What the JavaScript framework legs share: the same steps, checks and results file as harness.py.
//
// A leg runs as `node leg_<name>.mjs BASE_URL LEDGER RESULTS`: BASE_URL is a served copy of the
// treasury example, LEDGER its ledger file (how often the transfer ran), RESULTS the JSON file of
// step verdicts and the texts the framework showed its model (table.py prints it). The reviewer is
// plain fetch against the reviewer API; every check reads only the text the framework hands its model.

import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

export const REQUESTER_TOKEN = "alice-token";
const REVIEWER_TOKEN = "carol-token";
const AMOUNT = 30000; // above the treasury policy's 25,000 threshold: the call needs approval
const STEP_TIMEOUT_MS = 60_000;
const REFERENCE = /reference["':\s]+([A-Za-z0-9_-]{16,})/;

export class CheckFailed extends Error {}

export function check(condition, message) {
  if (!condition) throw new CheckFailed(message);
}

export function excerpt(text, limit = 240) {
  const flat = String(text).split(/\s+/).join(" ").trim();
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}

/** Named steps of one client's run: PASS/FAIL lines, then the results file. */
export class Leg {
  constructor(client) {
    const args = process.argv.slice(2);
    if (args.length !== 3) {
      console.error(`usage: node ${process.argv[1]} BASE_URL LEDGER RESULTS`);
      process.exit(2);
    }
    this.client = client;
    this.baseUrl = args[0].replace(/\/+$/, "").replace(/\/mcp$/, "");
    this.mcpUrl = `${this.baseUrl}/mcp`;
    this.ledger = args[1];
    this.results = args[2];
    this.steps = {};
    this.seen = {};
  }

  async step(name, run) {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
    });
    try {
      const detail = await Promise.race([run(), timeout]);
      this.steps[name] = "PASS";
      console.log(`PASS [${this.client}] ${name}: ${detail}`);
      return true;
    } catch (error) {
      this.steps[name] = "FAIL";
      console.log(`FAIL [${this.client}] ${name}: ${excerpt(error?.stack ?? error, 600)}`);
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  saw(step, text) {
    this.seen[step] = text;
    return text;
  }

  finish() {
    const failed = Object.values(this.steps).filter((verdict) => verdict !== "PASS").length;
    const document = { client: this.client, steps: this.steps, seen: this.seen };
    writeFileSync(this.results, `${JSON.stringify(document, null, 2)}\n`);
    console.log(`[${this.client}] ${Object.keys(this.steps).length - failed} passed, ${failed} failed`);
    return failed ? 1 : 0;
  }
}

export function newAccount(client, mode) {
  const slug = client.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
  return `${slug}-${mode}-${randomBytes(4).toString("hex")}`;
}

export function transfer(account) {
  return { to: account, amount: AMOUNT };
}

// --- the reviewer (plain HTTP) ------------------------------------------------------------------

async function reviewerRequest(baseUrl, method, path, body) {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${REVIEWER_TOKEN}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

async function pendingFor(baseUrl, account) {
  const { approvals } = await reviewerRequest(baseUrl, "GET", "/approvals?status=pending");
  return approvals.filter((r) => r.tool === "wire_transfer" && r.arguments?.to === account);
}

/** Wait for exactly one pending request for `account`, then decide it; "<id> -> <status>". */
async function decide(baseUrl, account, decision, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const mine = await pendingFor(baseUrl, account);
    check(mine.length <= 1, `${mine.length} pending requests for ${account}, expected one`);
    if (mine.length === 1) {
      const path = `/approvals/${encodeURIComponent(mine[0].id)}/decide`;
      const record = await reviewerRequest(baseUrl, "POST", path, { decision, comment: `framework leg ${decision}` });
      return `${record.id} -> ${record.status}`;
    }
    check(Date.now() < deadline, `no pending request for ${account} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function ledgerCount(ledger, account) {
  if (!existsSync(ledger)) return 0;
  return readFileSync(ledger, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line))
    .filter((entry) => entry.op === "wire_transfer" && entry.to === account).length;
}

// --- what the model must be able to act on ------------------------------------------------------

export function pendingReference(text) {
  check(text.includes("Stop and tell the user"), `no 'Stop and tell the user' in ${JSON.stringify(excerpt(text))}`);
  check(text.includes("approval_status"), `no approval_status in ${JSON.stringify(excerpt(text))}`);
  const match = REFERENCE.exec(text);
  check(match, `no reference in ${JSON.stringify(excerpt(text))}`);
  return match[1];
}

/** pending, status, approve -> result, ran once, deny -> denial, through `call` (the framework). */
export async function approvalFlow(leg, call) {
  const approved = newAccount(leg.client, "approve");
  const denied = newAccount(leg.client, "deny");
  let reference = "";
  const pending = await leg.step("pending", async () => {
    reference = pendingReference(leg.saw("pending", await call("wire_transfer", transfer(approved))));
    check(ledgerCount(leg.ledger, approved) === 0, "the transfer ran before a decision");
    return `reference ${reference}: ${excerpt(leg.seen.pending, 120)}`;
  });
  if (pending) {
    await leg.step("status", async () => {
      const text = leg.saw("status", await call("approval_status", { reference }));
      check(text.includes(reference) && /open|pending/.test(text), `approval_status said ${JSON.stringify(excerpt(text))}`);
      return excerpt(text, 120);
    });
    const approve = await leg.step("approve", async () => {
      const decided = await decide(leg.baseUrl, approved, "approve");
      const started = Date.now();
      const text = leg.saw("approve", await call("wire_transfer", transfer(approved)));
      const took = ((Date.now() - started) / 1000).toFixed(1);
      check(text.includes("completed"), `no transfer result ${took} s after the approval in ${JSON.stringify(excerpt(text))}`);
      return `${decided}; answered in ${took} s: ${excerpt(text, 120)}`;
    });
    if (approve) {
      await leg.step("ran once", async () => {
        const count = ledgerCount(leg.ledger, approved);
        check(count === 1, `${count} transfers to ${approved}, expected 1`);
        return `1 transfer to ${approved}`;
      });
    }
  }
  await leg.step("deny", async () => {
    pendingReference(await call("wire_transfer", transfer(denied)));
    const decided = await decide(leg.baseUrl, denied, "deny");
    const text = leg.saw("deny", await call("wire_transfer", transfer(denied)));
    check(text.includes("did not run"), `no 'did not run' in ${JSON.stringify(excerpt(text))}`);
    check(!text.includes("completed"), `a transfer result after a denial: ${JSON.stringify(excerpt(text))}`);
    const count = ledgerCount(leg.ledger, denied);
    check(count === 0, `${count} transfers to ${denied} after a denial`);
    return `${decided}; ${excerpt(text, 120)}`;
  });
}
