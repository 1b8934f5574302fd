#!/usr/bin/env node
// Peer check of tool approval (SEP-2848) with the MCP Inspector CLI against the treasury example.
//
// The MCP client here is the Inspector itself, run as a separate program exactly as a user would:
//   mcp-inspector --cli <url>/mcp --protocol-era modern --method tools/call --tool-name wire_transfer
//                 --tool-args-json '{...}' --header "Authorization: Bearer alice-token" --format json
// It has no approval-specific code: on the 2026-07-28 wire it declares io.modelcontextprotocol/tasks,
// accepts the CreateTaskResult and polls tasks/get (through ext-tasks) until the task is terminal,
// then prints the result. This script only (1) puts a recording pass-through proxy (wire_tap.mjs)
// between the Inspector and the server, to show what the Inspector sent and received; (2) plays the
// out-of-band human (carol on the reviewer HTTP API, plain fetch); (3) reads the task once more by
// id with the Inspector package's connection CLI (`mcpdo tasks/get <taskId>`), because
// `--cli --method tasks/get` is not offered by Inspector 2.12.0; and (4) reads the ledger with
// `--cli tools/call ledger`.
//
// Modes: approve / deny (as peer_approval.mjs: disposition, isError, body text, ledger count), and
// legacy-approve / legacy-deny: the Inspector's default era for an ad-hoc URL. That is the
// 2025-11-25 handshake, where the client declares no tasks; the treasury example answers with
// `without_tasks = "request"`: an isError result with the `undisclosed` envelope naming the approval
// request it opened, no tasks/get, no transfer. Calling again before the decision answers the same
// request; once carol decides, the identical call answers the outcome (the transfer ran once, or
// not at all), and a further identical call opens a new request without a second transfer.
//
// Usage: node inspector_approval.mjs http://127.0.0.1:PORT approve|deny|legacy-approve|legacy-deny
// Prints one PASS/FAIL line per check and a final "N passed, M failed" line; exits 1 on any failure.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { check, checkRunner, decidePendingApproval, ledgerEntries, pendingApprovalsFor, texts } from "./peer_common.mjs";
import { startWireTap } from "./wire_tap.mjs";

const MODERN_VERSION = "2026-07-28";
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities";
const DISPOSITION_META = "io.modelcontextprotocol/tool-approval-disposition";
const AUTHORIZATION_META = "io.modelcontextprotocol/authorization";
const REQUESTER = "Authorization: Bearer alice-token";
const REVIEWER_TOKEN = "carol-token";
const AMOUNT = 30000; // above the policy's 25,000 threshold: requestable denial
const STEP_TIMEOUT_MS = 30_000;
const EXIT_OK = 0;
const EXIT_TOOL_IS_ERROR = 5; // the Inspector CLI's exit code for a result with isError: true
const EXPECTED = {
  approve: { decision: "approve", disposition: "approved-executed", text: "ran once", ledger: 1, isError: false },
  deny: { decision: "deny", disposition: "denied-not-executed", text: "did not run", ledger: 0, isError: true },
  "legacy-approve": { decision: "approve", disposition: "approved-executed", text: "ran once", ledger: 1, isError: false },
  "legacy-deny": { decision: "deny", disposition: "denied-not-executed", text: "did not run", ledger: 0, isError: true },
};

const [baseArg, mode] = process.argv.slice(2);
if (!baseArg || !(mode in EXPECTED)) {
  console.error("usage: node inspector_approval.mjs <server base URL> approve|deny|legacy-approve|legacy-deny");
  process.exit(2);
}
const baseUrl = baseArg.replace(/\/+$/, "").replace(/\/mcp$/, "");
const expected = EXPECTED[mode];
const account = `inspector-${mode}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

// ---------------------------------------------------------------------------------------------
// The Inspector package, installed next to this file (.interop/node_modules)

const inspectorDir = fileURLToPath(new URL("./node_modules/@modelcontextprotocol/inspector/", import.meta.url));
const inspectorPackage = JSON.parse(readFileSync(join(inspectorDir, "package.json"), "utf8"));
const INSPECTOR = join(inspectorDir, inspectorPackage.bin["mcp-inspector"]);
const MCPDO = join(inspectorDir, inspectorPackage.bin.mcpdo);
// The Inspector writes ~/.mcp-inspector (catalog, secrets): keep that in a private, removed HOME.
const inspectorHome = mkdtempSync(join(tmpdir(), "mcp-approval-inspector-home-"));
const inspectorEnv = { ...process.env, HOME: inspectorHome, NO_COLOR: "1", MCP_INSPECTOR_SECRET_STORE: "file" };

// What this run started, so a SIGTERM (e.g. from `timeout` in interop.sh) leaves nothing behind.
const children = new Set();
let daemonPid;
let daemonDir;
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    for (const child of children) child.kill("SIGKILL");
    if (daemonPid) killQuietly(daemonPid);
    if (daemonDir) rmSync(daemonDir, { recursive: true, force: true });
    rmSync(inspectorHome, { recursive: true, force: true });
    process.exit(1);
  });
}

function killQuietly(pid) {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * Run `node script ...args`; resolves to { code, stdout, stderr } (SIGKILL after `timeoutMs`; a
 * process that could not start resolves with its error as `code`).
 */
function run(script, args, { env = inspectorEnv, timeoutMs = STEP_TIMEOUT_MS } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    const done = (code) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, stdout, stderr });
    };
    child.on("error", (error) => done(`spawn error: ${error.message}`));
    child.on("close", (code, signal) => done(code ?? signal));
  });
}

/** `mcp-inspector --cli <mcpUrl> ...args --format json`. */
function inspectorCli(mcpUrl, args, options) {
  return run(INSPECTOR, ["--cli", mcpUrl, ...args, "--format", "json"], options);
}

/** The end of a run's stderr, for failure messages. */
function tail(run) {
  return JSON.stringify(run.stderr.slice(-600));
}

/** `--method tools/call` arguments for `tool` with `toolArgs` as alice, on `era` (the Inspector's default if omitted). */
function toolCall(tool, toolArgs, era) {
  return [
    ...(era ? ["--protocol-era", era] : []),
    ...["--method", "tools/call", "--tool-name", tool, "--tool-args-json", JSON.stringify(toolArgs)],
    ...["--header", REQUESTER],
  ];
}

/** The `result` an Inspector CLI run printed, or an error carrying its output. */
function printedResult(cli) {
  try {
    const { result } = JSON.parse(cli.stdout);
    if (result) return result;
  } catch {
    // fall through to the error below
  }
  throw new Error(`no result printed (exit ${cli.code}); stdout ${JSON.stringify(cli.stdout)} stderr ${tail(cli)}`);
}

/** Wait until `probe()` returns a value other than undefined, or fail after `timeoutMs`. */
async function waitFor(probe, what, timeoutMs = STEP_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// ---------------------------------------------------------------------------------------------
// `mcpdo tasks/get <taskId>`: the Inspector's connection CLI, on a private daemon stopped afterwards

async function mcpdoTasksGet(mcpUrl, taskId) {
  const exports = await run(MCPDO, ["private"]);
  const env = { ...inspectorEnv };
  for (const [, name, value] of exports.stdout.matchAll(/^export (MCP_INSPECTOR_DAEMON_\w+)='([^']*)'$/gm)) env[name] = value;
  check(env.MCP_INSPECTOR_DAEMON_DIR && env.MCP_INSPECTOR_DAEMON_TOKEN, `mcpdo private printed ${exports.stdout}`);
  daemonDir = env.MCP_INSPECTOR_DAEMON_DIR;
  try {
    const connectArgs = ["--format", "json", "connect", mcpUrl, "--era", "modern", "--header", REQUESTER];
    const connect = await run(MCPDO, [...connectArgs, "--connection", "alice"], { env });
    daemonPid = await mcpdoDaemonPid(env);
    check(connect.code === 0, `mcpdo connect exited ${connect.code}: ${tail(connect)}`);
    // `--task-id=<id>`: a task id may begin with "-", which a bare argument would turn into an option
    const get = await run(MCPDO, ["--format", "json", "tasks/get", `--task-id=${taskId}`, "--connection", "alice"], { env });
    check(get.code === 0, `mcpdo tasks/get exited ${get.code}: ${get.stdout} ${tail(get)}`);
    return JSON.parse(get.stdout).task;
  } finally {
    await stopMcpdoDaemon(env);
  }
}

/** The pid of this run's private mcpdo daemon (`mcpdo daemon status`), or undefined if none runs. */
async function mcpdoDaemonPid(env) {
  const status = await run(MCPDO, ["daemon", "status"], { env });
  const pid = Number(/Daemon pid (\d+)/.exec(status.stdout)?.[1]);
  return pid || undefined;
}

async function stopMcpdoDaemon(env) {
  const pid = daemonPid ?? (await mcpdoDaemonPid(env));
  await run(MCPDO, ["daemon", "stop"], { env });
  if (pid) {
    // this run's own daemon, by its pid, if `daemon stop` did not end it
    await waitFor(() => (alive(pid) ? undefined : true), `mcpdo daemon ${pid} to exit`, 10_000).catch(() => killQuietly(pid));
  }
  daemonPid = undefined;
  daemonDir = undefined;
  rmSync(env.MCP_INSPECTOR_DAEMON_DIR, { recursive: true, force: true });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Checks

function isTaskCall(call) {
  return call.method === "tools/call" && call.params?.name === "wire_transfer" && call.params?.arguments?.to === account;
}

function bodyText(result) {
  const body = texts(result).join("\n");
  check(body.includes(expected.text), `expected text containing ${JSON.stringify(expected.text)}, got ${JSON.stringify(body)}`);
  return JSON.stringify(body);
}

async function ledgerCount(mcpUrl, era, wanted = expected.ledger) {
  const cli = await inspectorCli(mcpUrl, toolCall("ledger", {}, era));
  check(cli.code === EXIT_OK, `ledger call exited ${cli.code}: ${tail(cli)}`);
  const transfers = ledgerEntries(printedResult(cli)).filter((entry) => entry?.op === "wire_transfer" && entry?.to === account);
  check(transfers.length === wanted, `expected ${wanted} transfer(s) to ${account}, found ${transfers.length}`);
  return `${transfers.length} transfer(s) to ${account} (Inspector CLI tools/call ledger, ${era ?? "default era"})`;
}

async function taskRun(tap, step) {
  const mcpUrl = `${tap.url}/mcp`;
  const transfer = toolCall("wire_transfer", { to: account, amount: AMOUNT }, "modern");
  let exited = false;
  const pending = inspectorCli(mcpUrl, transfer, { timeoutMs: 3 * STEP_TIMEOUT_MS }).then((cli) => {
    exited = true;
    return cli;
  });
  let taskId;
  let cli;
  let result;
  const ok =
    (await step(`Inspector CLI: wire_transfer ${AMOUNT} to ${account} answered with a CreateTaskResult`, async () => {
      const call = await waitFor(() => {
        const answered = tap.calls().find((c) => isTaskCall(c) && (c.result || c.error));
        if (!answered && exited) throw new Error("the Inspector exited without an answer to tools/call on the wire");
        return answered;
      }, "the tools/call answer on the wire");
      check(call.headers["mcp-protocol-version"] === MODERN_VERSION, `request on ${call.headers["mcp-protocol-version"]}`);
      const declared = call.params?._meta?.[CLIENT_CAPABILITIES_META]?.extensions ?? {};
      check(TASKS_EXTENSION in declared, `the request did not declare ${TASKS_EXTENSION}: ${JSON.stringify(declared)}`);
      check(call.result?.resultType === "task", `expected resultType task, got ${JSON.stringify(call.result ?? call.error)}`);
      check(typeof call.result.taskId === "string" && call.result.taskId, "CreateTaskResult without a taskId");
      taskId = call.result.taskId;
      return `task ${taskId}, status ${call.result.status} (request on ${MODERN_VERSION} declaring ${TASKS_EXTENSION})`;
    })) &&
    (await step(`reviewer carol: ${expected.decision} (reviewer HTTP API)`, () =>
      decidePendingApproval({
        baseUrl,
        token: REVIEWER_TOKEN,
        tool: "wire_transfer",
        account,
        decision: expected.decision,
        comment: `inspector_approval.mjs ${mode}`,
        timeoutMs: STEP_TIMEOUT_MS,
      }),
    )) &&
    (await step("Inspector CLI polled tasks/get to completed and printed the result", async () => {
      cli = await pending;
      const wanted = expected.isError ? EXIT_TOOL_IS_ERROR : EXIT_OK;
      check(cli.code === wanted, `Inspector exited ${cli.code}, expected ${wanted}; stderr ${tail(cli)}`);
      result = printedResult(cli);
      const polls = tap.calls().filter((c) => c.method === "tasks/get" && c.params?.taskId === taskId);
      check(polls.length > 0, `no tasks/get for ${taskId} on the wire`);
      const last = polls.at(-1).result;
      check(last?.status === "completed", `last tasks/get answered ${JSON.stringify(last ?? polls.at(-1).error)}`);
      check(
        last.result?._meta?.[DISPOSITION_META] === result._meta?.[DISPOSITION_META],
        "the printed disposition differs from the one tasks/get returned",
      );
      return `${polls.length} tasks/get poll(s) for ${taskId}, last status ${last.status}; exit ${cli.code}`;
    }));
  if (ok) {
    await step("disposition", async () => {
      const disposition = result._meta?.[DISPOSITION_META];
      check(disposition === expected.disposition, `expected ${expected.disposition}, got ${JSON.stringify(disposition)}`);
      const isError = Boolean(result.isError);
      check(isError === expected.isError, `expected isError ${expected.isError}, got ${JSON.stringify(result.isError)}`);
      return `${DISPOSITION_META} = ${disposition}, isError ${Boolean(result.isError)}`;
    });
    await step("body text", async () => bodyText(result));
    await step(`mcpdo tasks/get ${taskId} (Inspector connection CLI)`, async () => {
      const task = await mcpdoTasksGet(mcpUrl, taskId);
      check(task?.taskId === taskId, `tasks/get answered for ${task?.taskId}`);
      check(task.status === "completed", `status ${task.status}`);
      const disposition = task.raw?.result?._meta?.[DISPOSITION_META];
      check(disposition === expected.disposition, `expected ${expected.disposition}, got ${JSON.stringify(disposition)}`);
      return `status ${task.status}, ${DISPOSITION_META} = ${disposition}`;
    });
  } else if (!exited) {
    await pending; // bounded by its own timeout
  }
  await step("ledger", () => ledgerCount(mcpUrl, "modern"));
  return ok;
}

/** The approval request reference a pending answer names, or undefined. */
function referenceOf(result) {
  return /reference (\S+)\)/.exec(texts(result).join(" "))?.[1];
}

/** Check a pending answer (not a task, isError, undisclosed, no disposition); returns its reference. */
function pendingReference(cli) {
  check(cli.code === EXIT_TOOL_IS_ERROR, `Inspector exited ${cli.code}, expected ${EXIT_TOOL_IS_ERROR}; stderr ${tail(cli)}`);
  const result = printedResult(cli);
  check(result.resultType !== "task" && !result.taskId, `a task answer: ${JSON.stringify(result)}`);
  const remediation = result._meta?.[AUTHORIZATION_META]?.remediation;
  check(remediation === "undisclosed", `expected undisclosed, got ${JSON.stringify(remediation)}`);
  check(result._meta?.[AUTHORIZATION_META]?.authorizationContextId, "no authorizationContextId");
  check(result._meta?.[DISPOSITION_META] === undefined, "a disposition on a pending answer");
  const reference = referenceOf(result);
  check(reference, `no request reference in ${JSON.stringify(texts(result))}`);
  return reference;
}

async function legacyRun(tap, step) {
  const mcpUrl = `${tap.url}/mcp`;
  const transfer = toolCall("wire_transfer", { to: account, amount: AMOUNT }); // no --protocol-era
  let reference;
  let result;
  const ok =
    (await step(`Inspector CLI, default era: wire_transfer ${AMOUNT} to ${account} opens a request`, async () => {
      const cli = await inspectorCli(mcpUrl, transfer);
      const call = tap.calls().find((c) => isTaskCall(c));
      check(call, "no tools/call for the transfer on the wire");
      const init = tap.calls().find((c) => c.method === "initialize");
      check(init, "no initialize on the wire: not the legacy handshake");
      const version = call.headers["mcp-protocol-version"];
      check(version !== MODERN_VERSION, `tools/call went out on ${version}`);
      const declared = TASKS_EXTENSION in (init.params?.capabilities?.extensions ?? {});
      reference = pendingReference(cli);
      return `initialize ${init.params?.protocolVersion} (declares ${TASKS_EXTENSION}: ${declared}); request ${reference}`;
    })) &&
    (await step("calling again before a decision answers the same request", async () => {
      const again = pendingReference(await inspectorCli(mcpUrl, transfer));
      check(again === reference, `a second request ${again} instead of ${reference}`);
      const pending = await pendingApprovalsFor(baseUrl, REVIEWER_TOKEN, "wire_transfer", account);
      check(pending.length === 1, `${pending.length} pending approval request(s) for ${account}`);
      const polls = tap.calls().filter((c) => c.method.startsWith("tasks/"));
      check(polls.length === 0, `${polls.length} tasks/* request(s) on the wire`);
      return `request ${again}; 1 pending approval for ${account}; 0 tasks/* requests`;
    })) &&
    (await step("ledger while pending", () => ledgerCount(mcpUrl, undefined, 0))) &&
    (await step(`reviewer carol: ${expected.decision} (reviewer HTTP API)`, () =>
      decidePendingApproval({
        baseUrl,
        token: REVIEWER_TOKEN,
        tool: "wire_transfer",
        account,
        decision: expected.decision,
        comment: `inspector_approval.mjs ${mode}`,
        timeoutMs: STEP_TIMEOUT_MS,
      }),
    )) &&
    (await step("the identical call answers the outcome", async () => {
      result = await waitFor(async () => {
        const cli = await inspectorCli(mcpUrl, transfer);
        const printed = printedResult(cli);
        return printed._meta?.[DISPOSITION_META] ? printed : undefined;
      }, "an answer carrying a disposition");
      const disposition = result._meta[DISPOSITION_META];
      check(disposition === expected.disposition, `expected ${expected.disposition}, got ${JSON.stringify(disposition)}`);
      check(Boolean(result.isError) === expected.isError, `expected isError ${expected.isError}, got ${result.isError}`);
      return `${DISPOSITION_META} = ${disposition}, isError ${Boolean(result.isError)}`;
    })) &&
    (await step("body text", async () => bodyText(result))) &&
    (await step("ledger after the decision", () => ledgerCount(mcpUrl, undefined))) &&
    (await step("the approval is spent: a further identical call opens a new request", async () => {
      const next = pendingReference(await inspectorCli(mcpUrl, transfer));
      check(next !== reference, `the spent request ${reference} answered again`);
      return `new request ${next}`;
    }));
  await step("ledger after the second retry", () => ledgerCount(mcpUrl, undefined));
  return ok;
}

async function main() {
  const { step, counts } = checkRunner(mode, 4 * STEP_TIMEOUT_MS);
  let tap;
  let ok = false;
  try {
    tap = await startWireTap(baseUrl);
    console.log(`Inspector ${inspectorPackage.version} on node ${process.version}; ${tap.url}/mcp -> ${baseUrl}/mcp`);
    ok = mode.startsWith("legacy-") ? await legacyRun(tap, step) : await taskRun(tap, step);
  } finally {
    await tap?.close();
    rmSync(inspectorHome, { recursive: true, force: true });
  }
  const { passed, failed } = counts();
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 && ok ? 0 : 1;
}

process.exitCode = await main();
