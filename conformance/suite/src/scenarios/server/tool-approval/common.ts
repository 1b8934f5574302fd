/**
 * SEP-2848 Tool Approval: what every tool-approval scenario shares.
 *
 * The scenarios speak raw JSON-RPC as a 2026-07-28 client (the per-request `_meta` envelope and
 * the `Mcp-Method` / `Mcp-Name` headers), as two principals, and read every answer within a size
 * cap and a wall-clock deadline. What they need to know of the server under test comes from the
 * environment variable `MCP_CONFORMANCE_TOOL_APPROVAL` (JSON, see {@link ApprovalFixture}); its
 * defaults are the fixture names a conformance server would expose.
 *
 * A decision is made out of band: by a command (argv, run without a shell, the values in
 * `MCP_CHECK_*` variables; exit 0 decided, 75 no such request yet), or by a fixture tool the
 * server exposes for the suite. The witness is a tool whose result lists the executions of the
 * gated tool, each carrying the call's arguments (and so its nonce).
 */

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';

import { CheckStatus, ConformanceCheck } from '../../../types';

export const TASKS = 'io.modelcontextprotocol/tasks';
export const TOOL_APPROVAL = 'io.modelcontextprotocol/tool-approval';
export const DENIALS = 'io.modelcontextprotocol/structured-authorization-denials';
export const ENVELOPE = 'io.modelcontextprotocol/authorization';
export const DISPOSITION = 'io.modelcontextprotocol/tool-approval-disposition';
export const SEP_2848 = { id: 'SEP-2848', url: 'https://github.com/modelcontextprotocol/modelcontextprotocol/pull/2848' };
export const SEP_2643 = { id: 'SEP-2643', url: 'https://github.com/modelcontextprotocol/modelcontextprotocol/pull/2643' };
export const SEP_2663 = { id: 'SEP-2663', url: 'https://github.com/modelcontextprotocol/modelcontextprotocol/pull/2663' };
export const SOURCE = { extensionId: TOOL_APPROVAL };

const PROTOCOL = '2026-07-28';
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
const NOT_YET = 75;

type Json = Record<string, unknown>;

/** What the scenarios are told of the server under test. */
export interface ApprovalFixture {
  /** The gated tool, and its arguments: `{nonce}` in a string is fresh for each call. */
  tool: string;
  arguments: Json;
  /** The same call with one argument changed (also with `{nonce}`). */
  changedArguments: Json;
  /** Bearer tokens of two principals who may both make the call. */
  token: string;
  otherToken: string;
  /** A command that decides out of band (argv), or else a fixture tool called `{decision, arguments}`. */
  decide?: string[];
  decideTool: string;
  /** A tool (no arguments) whose result lists the gated tool's executions. */
  witnessTool: string;
  /** Strings that are backend artifacts (endpoints, ids) no answer may carry. */
  artifacts: string[];
  timeoutMs: number;
  settleMs: number;
}

export function fixture(): ApprovalFixture {
  const given = JSON.parse(process.env.MCP_CONFORMANCE_TOOL_APPROVAL ?? '{}') as Partial<ApprovalFixture>;
  return {
    tool: 'test_tool_approval',
    arguments: { label: 'approve-{nonce}' },
    changedArguments: { label: 'approve-{nonce}-changed' },
    token: 'conformance-principal',
    otherToken: 'conformance-other-principal',
    decideTool: 'test_tool_approval_decide',
    witnessTool: 'test_tool_approval_ledger',
    artifacts: [],
    timeoutMs: 30000,
    settleMs: 1000,
    ...given
  };
}

export function nonce(): string {
  return 'chk' + randomBytes(6).toString('hex');
}

export function fill(template: unknown, value: string): unknown {
  if (typeof template === 'string') return template.split('{nonce}').join(value);
  if (Array.isArray(template)) return template.map((item) => fill(item, value));
  if (template !== null && typeof template === 'object') {
    return Object.fromEntries(Object.entries(template).map(([key, item]) => [key, fill(item, value)]));
  }
  return template;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One answer: the HTTP status, the JSON-RPC message (`{}` when none) and the raw text. */
export class Reply {
  constructor(
    readonly status: number,
    readonly message: Json,
    readonly text: string
  ) {}

  get result(): Json | undefined {
    const value = this.message.result;
    return value !== null && typeof value === 'object' ? (value as Json) : undefined;
  }

  get error(): Json | undefined {
    const value = this.message.error;
    return value !== null && typeof value === 'object' ? (value as Json) : undefined;
  }

  brief(): string {
    if (this.error) return `HTTP ${this.status} error ${String(this.error.code)}: ${String(this.error.message)}`;
    const shown = Object.fromEntries(
      ['resultType', 'status', 'isError', 'taskId'].filter((key) => this.result && key in this.result).map((key) => [key, this.result?.[key]])
    );
    return `HTTP ${this.status} ${JSON.stringify(shown)}`;
  }
}

/** Requests to one endpoint as the bearer of one token; every answer is kept in `seen`. */
export class Wire {
  private ids = 1;

  constructor(
    readonly url: string,
    readonly token: string,
    readonly timeoutMs: number,
    readonly seen: string[]
  ) {}

  async request(method: string, params: Json = {}, declareTasks = true): Promise<Reply> {
    const capabilities: Json = { elicitation: { form: {} } };
    if (declareTasks) capabilities.extensions = { [TASKS]: {} };
    const meta = {
      'io.modelcontextprotocol/protocolVersion': PROTOCOL,
      'io.modelcontextprotocol/clientInfo': { name: 'conformance-tool-approval', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': capabilities
    };
    const id = this.ids++;
    const headers: Record<string, string> = {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-protocol-version': PROTOCOL,
      'mcp-method': method,
      authorization: `Bearer ${this.token}`
    };
    const name = params.taskId ?? params.name;
    if (typeof name === 'string') headers['mcp-name'] = headerValue(name);
    const body = JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } });
    const response = await fetch(this.url, { method: 'POST', headers, body, signal: AbortSignal.timeout(this.timeoutMs) });
    const text = await readCapped(response);
    this.seen.push(text);
    return new Reply(response.status, decode(text, response.headers.get('content-type') ?? '', id), text);
  }

  call(tool: string, args: Json, declareTasks = true): Promise<Reply> {
    return this.request('tools/call', { name: tool, arguments: args }, declareTasks);
  }

  get(taskId: string): Promise<Reply> {
    return this.request('tasks/get', { taskId });
  }

  cancel(taskId: string): Promise<Reply> {
    return this.request('tasks/cancel', { taskId });
  }
}

/** A header-safe form of a value (SEP-2243's base64 sentinel when it is not printable ASCII). */
function headerValue(value: string): string {
  return /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value) ? value : `=?base64?${Buffer.from(value).toString('base64')}?=`;
}

async function readCapped(response: Response): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_ANSWER_BYTES) {
      await reader.cancel();
      throw new Error(`the answer exceeded ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function decode(text: string, contentType: string, id: number): Json {
  const parse = (raw: string): unknown => {
    try {
      return JSON.parse(raw);
    } catch {
      return undefined;
    }
  };
  if (contentType.startsWith('text/event-stream')) {
    for (const event of text.replace(/\r\n/g, '\n').split('\n\n')) {
      const data = event.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trimStart()).join('\n');
      const message = parse(data) as Json | undefined;
      if (message && message.id === id) return message;
    }
    return {};
  }
  const message = parse(text);
  return message !== null && typeof message === 'object' ? (message as Json) : {};
}

/** The two principals' wires, the fixture, and what a scenario opened (to cancel at its end). */
export class Run {
  readonly seen: string[] = [];
  readonly one: Wire;
  readonly other: Wire;
  readonly opened: Array<{ wire: Wire; taskId: string }> = [];
  readonly backendIds: string[] = [];

  constructor(
    readonly url: string,
    readonly fx: ApprovalFixture = fixture()
  ) {
    this.one = new Wire(url, fx.token, fx.timeoutMs, this.seen);
    this.other = new Wire(url, fx.otherToken, fx.timeoutMs, this.seen);
  }

  arguments(value: string, changed = false): Json {
    return fill(changed ? this.fx.changedArguments : this.fx.arguments, value) as Json;
  }

  /** A fresh gated call declaring tasks; its CreateTaskResult (or what came instead). */
  async open(wire: Wire, args: Json): Promise<{ reply: Reply; taskId?: string }> {
    const reply = await wire.call(this.fx.tool, args);
    const taskId = reply.result?.resultType === 'task' ? reply.result.taskId : undefined;
    if (typeof taskId === 'string') {
      this.opened.push({ wire, taskId });
      return { reply, taskId };
    }
    return { reply };
  }

  /** How many executions of the call with `value` the witness shows, and the records. */
  async executions(value: string): Promise<Json[]> {
    const reply = await this.one.call(this.fx.witnessTool, {});
    if (!reply.result || reply.result.isError) throw new Error(`the witness tool failed: ${reply.brief()}`);
    const shown = reply.result.structuredContent ?? reply.result.content;
    const found: Json[] = [];
    collect(shown, value, undefined, found);
    return found;
  }

  async status(taskId: string, wire: Wire = this.one): Promise<Json> {
    const reply = await wire.get(taskId);
    if (!reply.result) throw new Error(`tasks/get of its own task answered ${reply.brief()}`);
    return reply.result;
  }

  async settled(taskId: string): Promise<Json> {
    const deadline = Date.now() + this.fx.timeoutMs;
    for (;;) {
      const task = await this.status(taskId);
      if (['completed', 'failed', 'cancelled'].includes(String(task.status))) return task;
      if (Date.now() > deadline) throw new Error(`task ${taskId} still ${String(task.status)}`);
      await sleep(200);
    }
  }

  /** Decide the pending request of the call with `args` out of band; whether it was decided. */
  async decide(decision: 'approve' | 'deny', args: Json, taskId: string, retry = true): Promise<boolean> {
    const deadline = Date.now() + this.fx.timeoutMs;
    for (;;) {
      const code = await this.decideOnce(decision, args, taskId);
      if (code === 0) return true;
      if (code !== NOT_YET || !retry || Date.now() > deadline) return false;
      await sleep(200);
    }
  }

  private async decideOnce(decision: string, args: Json, taskId: string): Promise<number> {
    if (!this.fx.decide) {
      const reply = await this.one.call(this.fx.decideTool, { decision, arguments: args }, false);
      return reply.result && !reply.result.isError ? 0 : NOT_YET;
    }
    const [command, ...rest] = this.fx.decide;
    const env = {
      ...process.env,
      MCP_CHECK_DECISION: decision,
      MCP_CHECK_TOOL: this.fx.tool,
      MCP_CHECK_ARGUMENTS: JSON.stringify(args),
      MCP_CHECK_TASK_ID: taskId
    };
    return new Promise((resolve) => {
      execFile(command, rest, { env, timeout: this.fx.timeoutMs, maxBuffer: MAX_ANSWER_BYTES }, (error, stdout) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        if (code === 0) this.backendIds.push(...stdout.split('\n').map((line) => line.trim()).filter(Boolean));
        resolve(code);
      });
    });
  }

  /** Cancel what the scenario left pending. */
  async close(): Promise<void> {
    for (const { wire, taskId } of this.opened) {
      await wire.cancel(taskId).catch(() => undefined);
    }
  }
}

/** Each record (the topmost object below the nearest list) that carries `value`. */
function collect(shown: unknown, value: string, record: Json | undefined, found: Json[]): void {
  if (Array.isArray(shown)) {
    for (const item of shown) collect(item, value, undefined, found);
  } else if (shown !== null && typeof shown === 'object') {
    const top = record ?? (shown as Json);
    for (const item of Object.values(shown)) collect(item, value, top, found);
  } else if (typeof shown === 'string' && shown.includes(value)) {
    if (record === undefined) found.push({ text: shown });
    else if (!found.includes(record)) found.push(record);
  }
}

/** Run a scenario's steps: an exception fails its main check (`id`); what it opened is cancelled. */
export async function attempt(
  run: Run,
  checks: Checks,
  id: string,
  description: string,
  steps: () => Promise<void>
): Promise<ConformanceCheck[]> {
  try {
    await steps();
  } catch (error) {
    checks.fail(id, description, error);
  } finally {
    await run.close();
  }
  return checks.list;
}

/** The text content of a CallToolResult. */
export function bodyText(result: Json | undefined): string {
  const content = Array.isArray(result?.content) ? (result?.content as Json[]) : [];
  return content.map((item) => String(item.text ?? '')).join(' ');
}

export function meta(document: Json | undefined): Json {
  const value = document?._meta;
  return value !== null && typeof value === 'object' ? (value as Json) : {};
}

/** Builds a scenario's checks, one per statement id. */
export class Checks {
  readonly list: ConformanceCheck[] = [];

  add(id: string, description: string, problem: string | undefined, details: Record<string, unknown> = {}, status?: CheckStatus): void {
    const reference = id.startsWith('sep-2643') ? SEP_2643 : id.startsWith('sep-2663') ? SEP_2663 : SEP_2848;
    this.list.push({
      id,
      name: id,
      description,
      status: status ?? (problem === undefined ? 'SUCCESS' : 'FAILURE'),
      timestamp: new Date().toISOString(),
      specReferences: [reference],
      details,
      ...(problem === undefined ? {} : { errorMessage: problem })
    });
  }

  skip(id: string, description: string, why: string): void {
    this.add(id, description, undefined, { why }, 'SKIPPED');
  }

  fail(id: string, description: string, error: unknown): void {
    this.add(id, description, error instanceof Error ? error.message : String(error));
  }
}
