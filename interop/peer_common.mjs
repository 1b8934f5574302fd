// What the interop peers share: the raw 2026-07-28 dispatch they hand to ext-tasks (ext-tasks frames
// each request, this only carries it over streamable HTTP: routing headers per SEP-2243, JSON or SSE
// answers), the reviewer HTTP API calls that stand in for the human, readers of tool results, and
// the PASS/FAIL check runner with a timeout per check.

let nextRequestId = 1;

/** Routing-header value per SEP-2243: the raw value when header-safe, else the base64 sentinel. */
function headerValue(value) {
  return /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value)
    ? value
    : `=?base64?${Buffer.from(value, "utf8").toString("base64")}?=`;
}

/** The Mcp-Name value of a request: the tool name, or the task id of tasks/*. */
function routingName(method, params) {
  if (method === "tools/call" || method === "prompts/get") return params?.name;
  if (method === "resources/read") return params?.uri;
  if (method.startsWith("tasks/")) return params?.taskId;
  return undefined;
}

/** Merge header maps, later ones winning, with case-insensitive names (no "x, x" duplicates). */
function mergeHeaders(...maps) {
  const merged = new Map();
  for (const map of maps) {
    for (const [name, value] of Object.entries(map ?? {})) merged.set(name.toLowerCase(), value);
  }
  return Object.fromEntries(merged);
}

/** The JSON-RPC response with `id` from a JSON or SSE HTTP response. */
async function readResponse(response, id) {
  const type = response.headers.get("content-type") ?? "";
  const text = await response.text();
  if (type.includes("text/event-stream")) {
    const messages = text
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trim())
      .filter((data) => data.length > 0)
      .map((data) => JSON.parse(data));
    const match = messages.find((message) => message.id === id && ("result" in message || "error" in message));
    if (match) return match;
    throw new Error(`no response with id ${id} in the SSE stream (HTTP ${response.status})`);
  }
  if (!text) throw new Error(`empty HTTP ${response.status} response`);
  return JSON.parse(text);
}

/**
 * A `rawDispatch` for `createTaskSessionFromClient` posting to `serverUrl` on `protocolVersion`,
 * with `extraHeaders` (e.g. a bearer token) on every request.
 */
export function makeRawDispatch({ serverUrl, protocolVersion, extraHeaders = {} }) {
  return async function rawDispatch(request, options = {}) {
    const id = request.id ?? `peer-${nextRequestId++}`;
    const body = { ...request, jsonrpc: "2.0", id };
    const name = routingName(body.method, body.params);
    const headers = mergeHeaders(
      {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": protocolVersion,
        "Mcp-Method": body.method,
        ...(typeof name === "string" ? { "Mcp-Name": headerValue(name) } : {}),
      },
      options.context?.headers,
      extraHeaders,
    );
    const timeout = options.context?.requestTimeoutMs;
    const signals = [options.signal, timeout ? AbortSignal.timeout(timeout) : undefined].filter(Boolean);
    const response = await fetch(serverUrl, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      ...(signals.length > 0 ? { signal: AbortSignal.any(signals) } : {}),
    });
    const message = await readResponse(response, id);
    return message.error ? { kind: "error", error: message.error } : { kind: "result", result: message.result };
  };
}

/** `promise`, or a rejection after `ms` milliseconds. */
export async function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// The out-of-band human: a reviewer on the reviewer HTTP API (plain fetch, not MCP client code).

/** One reviewer API request as the bearer of `token`; the parsed JSON body, or an error on non-2xx. */
export async function reviewerRequest(baseUrl, token, method, path, body) {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body ? { "Content-Type": "application/json" } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

/** The pending approval requests for `tool` whose `to` argument is `account`. */
export async function pendingApprovalsFor(baseUrl, token, tool, account) {
  const { approvals } = await reviewerRequest(baseUrl, token, "GET", "/approvals?status=pending");
  return approvals.filter((record) => record.tool === tool && record.arguments?.to === account);
}

/**
 * Wait until exactly one approval request for `tool` to `account` is pending, then decide it
 * (`decision` is "approve" or "deny"); "<id> -> <status>". Fails on two or more, or after `timeoutMs`.
 */
export async function decidePendingApproval({ baseUrl, token, tool, account, decision, comment, timeoutMs }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const mine = await pendingApprovalsFor(baseUrl, token, tool, account);
    if (mine.length > 1) throw new Error(`${mine.length} pending approvals for ${account}, expected one`);
    if (mine.length === 1) {
      const path = `/approvals/${encodeURIComponent(mine[0].id)}/decide`;
      const record = await reviewerRequest(baseUrl, token, "POST", path, { decision, comment });
      return `${record.id} -> ${record.status}`;
    }
    if (Date.now() > deadline) throw new Error(`no pending approval for ${account} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// ---------------------------------------------------------------------------------------------
// Reading tool results

/** The text blocks of a CallToolResult. */
export function texts(result) {
  return (result?.content ?? []).filter((block) => block.type === "text").map((block) => block.text);
}

/** The entries of a treasury `ledger` result: structured content, or JSON in the text blocks. */
export function ledgerEntries(result) {
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

// ---------------------------------------------------------------------------------------------
// Checks

/** Throw `message` unless `condition` holds. */
export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/**
 * Named checks that print "PASS [label] name: detail" or "FAIL [label] name: error", each bounded
 * by `timeoutMs`; `step` resolves to whether the check passed, `counts()` to {passed, failed}.
 */
export function checkRunner(label, timeoutMs) {
  let passed = 0;
  let failed = 0;
  async function step(name, run) {
    try {
      const detail = await withTimeout(run(), timeoutMs);
      passed += 1;
      console.log(`PASS [${label}] ${name}: ${detail}`);
      return true;
    } catch (error) {
      failed += 1;
      console.log(`FAIL [${label}] ${name}: ${error?.message ?? error}`);
      return false;
    }
  }
  return { step, counts: () => ({ passed, failed }) };
}
