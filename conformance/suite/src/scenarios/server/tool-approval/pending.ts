/**
 * SEP-2848 Tool Approval — a call while its approval is pending.
 *
 * Required server fixtures (or `MCP_CONFORMANCE_TOOL_APPROVAL`, see common.ts): a tool whose call
 * is a requestable denial for both test principals, a witness tool listing its executions, and a
 * way to decide out of band. Each check is named by the statement id of `src/seps/sep-2848.yaml`
 * (and of SEP-2643's and SEP-2663's files).
 */

import { ClientScenario, ConformanceCheck } from '../../../types';
import { Checks, DENIALS, ENVELOPE, Run, SOURCE, TASKS, TOOL_APPROVAL, attempt, bodyText, meta, nonce } from './common';

export class ToolApprovalDeclaresExtensionsScenario implements ClientScenario {
  name = 'tool-approval-declares-extensions';
  source = SOURCE;
  description = `A tool-approval server declares io.modelcontextprotocol/tool-approval and the tasks extension it builds on in server/discover.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const reply = await new Run(serverUrl).one.request('server/discover');
    const extensions = (reply.result?.capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions ?? {};
    const missing = [TASKS, TOOL_APPROVAL].filter((id) => !(id in extensions));
    checks.add('sep-2663-server-advertises-extension', 'capabilities.extensions names the tasks extension', TASKS in extensions ? undefined : `server/discover: ${reply.brief()}`);
    checks.add(
      'sep-2848-server-declares-both-extensions',
      'capabilities.extensions names tool-approval and tasks',
      missing.length ? `missing ${missing.join(', ')}` : undefined,
      { extensions: Object.keys(extensions) }
    );
    return checks.list;
  }
}

export class ToolApprovalNoTasksClientScenario implements ClientScenario {
  name = 'tool-approval-no-tasks-client';
  source = SOURCE;
  description = `A client that did not declare tasks gets -32021 naming the tasks extension, or a CallToolResult with isError: true and guidance; never a task; the tool does not run.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const value = nonce();
    const reply = await run.one.call(run.fx.tool, run.arguments(value), false);
    const runs = (await run.executions(value)).length;
    const details = { answer: reply.brief(), runs };
    let problem: string | undefined;
    if (runs) problem = `the tool ran ${runs} time(s) for a client without tasks, without approval`;
    else if (reply.error) {
      const code = reply.error.code;
      if (code !== -32021 && code !== -32003) problem = `error ${String(code)}, not -32021`;
      else if (!JSON.stringify(reply.error.data ?? {}).includes(TASKS)) problem = `the error's data does not name ${TASKS}`;
    } else if (reply.result?.resultType === 'task') problem = 'a task was returned to a client that did not declare tasks';
    else if (reply.result?.isError !== true || !bodyText(reply.result).trim()) problem = 'neither -32021 nor isError with guidance';
    checks.add('sep-2848-no-tasks-client', 'the call without tasks is -32021 or an isError result; nothing runs', problem, details);
    checks.add(
      'sep-2663-no-task-unless-request-declares',
      'no CreateTaskResult for a request that did not declare the extension',
      reply.result?.resultType === 'task' ? 'a task was returned' : undefined
    );
    if (reply.error?.code === -32003) {
      checks.add('sep-2848-no-tasks-client-code', '-32003 is the pre-release number; 2026-07-28 allocates -32021', undefined, {}, 'INFO');
    }
    return checks.list;
  }
}

export class ToolApprovalRequestableDenialScenario implements ClientScenario {
  name = 'tool-approval-requestable-denial-returns-task';
  source = SOURCE;
  description = `A requestable denial returns a working task (with a statusMessage, readable at once) without executing the tool.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const value = nonce();
    return attempt(run, checks, 'sep-2848-requestable-returns-task-without-executing', 'a working task, and the tool did not run', async () => {
      const { reply, taskId } = await run.open(run.one, run.arguments(value));
      const read = taskId ? await run.one.get(taskId) : undefined;
      const runs = (await run.executions(value)).length;
      const created = reply.result ?? {};
      let problem: string | undefined;
      if (!taskId) problem = `the gated call did not return a task: ${reply.brief()}`;
      else if (runs) problem = `the tool ran ${runs} time(s) before any approval`;
      else if (!['working', 'input_required'].includes(String(created.status))) problem = `created ${String(created.status)}`;
      else if (typeof created.statusMessage !== 'string' || !created.statusMessage) problem = 'no statusMessage';
      checks.add('sep-2848-requestable-returns-task-without-executing', 'a working task, and the tool did not run', problem, { answer: reply.brief(), runs });
      checks.add('sep-2663-result-type-task-on-create', 'resultType task on the CreateTaskResult', created.resultType === 'task' ? undefined : `resultType ${String(created.resultType)}`);
      checks.add('sep-2663-readable-before-create-result', 'tasks/get right after the CreateTaskResult finds the task', read?.result ? undefined : `tasks/get answered ${read?.brief() ?? 'nothing'}`);
    });
  }
}

export class ToolApprovalEnvelopeWhilePendingScenario implements ClientScenario {
  name = 'tool-approval-envelope-while-pending';
  source = SOURCE;
  description = `A SEP-2643 server puts the envelope (insufficient_authorization, available, a task hint) on the CreateTaskResult and repeats it on every tasks/get while the task is pending.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const description = 'the envelope on the CreateTaskResult and on tasks/get while pending';
    const discovered = await run.one.request('server/discover');
    const extensions = (discovered.result?.capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions ?? {};
    if (!(DENIALS in extensions)) {
      checks.skip('sep-2848-envelope-repeated-while-pending', description, `the server does not declare ${DENIALS}`);
      return checks.list;
    }
    return attempt(run, checks, 'sep-2848-envelope-repeated-while-pending', description, async () => {
      const { reply, taskId } = await run.open(run.one, run.arguments(nonce()));
      if (!taskId) throw new Error(`the gated call did not return a task: ${reply.brief()}`);
      const task = await run.status(taskId);
      const wrong = [reply.result, task].map((document) => meta(document)[ENVELOPE] as Record<string, unknown> | undefined).find((envelope) => {
        const hints = Array.isArray(envelope?.remediationHints) ? (envelope?.remediationHints as Array<{ type?: string }>) : [];
        return envelope?.reason !== 'insufficient_authorization' || envelope?.remediation !== 'available' || !hints.some((hint) => hint.type === 'task');
      });
      const problem = wrong === undefined && task.status !== undefined ? undefined : `envelope ${JSON.stringify(wrong ?? null)}`;
      checks.add('sep-2848-envelope-repeated-while-pending', description, problem);
      checks.add('sep-2643-server-task-hint', 'the envelope has a task hint', problem);
    });
  }
}

export class ToolApprovalTaskAccessScenario implements ClientScenario {
  name = 'tool-approval-task-bound-to-principal';
  source = SOURCE;
  description = `Another principal can neither read nor cancel a pending approval task.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const description = "the other principal's tasks/get and tasks/cancel are refused; the task stays pending";
    return attempt(run, checks, 'sep-2848-task-access-by-origin', description, async () => {
      const { reply, taskId } = await run.open(run.one, run.arguments(nonce()));
      if (!taskId) throw new Error(`the gated call did not return a task: ${reply.brief()}`);
      const read = await run.other.get(taskId);
      const cancel = await run.other.cancel(taskId);
      const status = (await run.status(taskId)).status;
      let problem: string | undefined;
      if (!read.error) problem = 'the other principal read the task';
      else if (!cancel.error) problem = "the other principal's tasks/cancel was accepted";
      else if (!['working', 'input_required'].includes(String(status))) problem = `the task is now ${String(status)}`;
      checks.add('sep-2848-task-access-by-origin', description, problem, { read: read.brief(), cancel: cancel.brief() });
      checks.add('sep-2663-task-access-by-principal', description, problem);
    });
  }
}
