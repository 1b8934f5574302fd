/**
 * SEP-2848 Tool Approval — a call once decided out of band: approval runs it once and as bound,
 * a denial is a completed task that says so, a decision covers that call only, a cancelled task
 * never runs, and no answer carries the backend's artifacts.
 */

import { ClientScenario, ConformanceCheck } from '../../../types';
import { Checks, DENIALS, DISPOSITION, ENVELOPE, Run, SOURCE, attempt, bodyText, meta, nonce, sleep } from './common';
import { denialBodyProblem, executedBodyProblem } from './judge';

type Json = Record<string, unknown>;

/** Open a gated call as a task and decide it; the settled task. */
async function decided(run: Run, decision: 'approve' | 'deny', value: string): Promise<{ taskId: string; task: Json; args: Json }> {
  const args = run.arguments(value);
  const { reply, taskId } = await run.open(run.one, args);
  if (!taskId) throw new Error(`the gated call did not return a task: ${reply.brief()}`);
  if (!(await run.decide(decision, args, taskId))) throw new Error(`could not ${decision} out of band`);
  return { taskId, task: await run.settled(taskId), args };
}

function same(shown: unknown, sent: unknown): boolean {
  if (typeof shown === 'number' && typeof sent === 'number') return shown === sent;
  return JSON.stringify(shown) === JSON.stringify(sent);
}

export class ToolApprovalAtMostOnceScenario implements ClientScenario {
  name = 'tool-approval-executes-at-most-once';
  source = SOURCE;
  description = `Approved out of band, the task completes approved-executed, the tool ran once with exactly the approved arguments, and the body says it ran.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const value = nonce();
    return attempt(run, checks, 'sep-2848-at-most-once', 'approved, it runs once', async () => {
      const { task, args } = await decided(run, 'approve', value);
      await sleep(run.fx.settleMs);
      const records = await run.executions(value);
      const result = (task.result ?? {}) as Json;
      const disposition = meta(result)[DISPOSITION];
      checks.add('sep-2848-at-most-once', 'completed, and the tool ran once', task.status === 'completed' && records.length === 1 ? undefined : `status ${String(task.status)}, ${records.length} run(s)`);
      checks.add('sep-2848-disposition-required', 'the disposition approved-executed', disposition === 'approved-executed' ? undefined : `disposition ${String(disposition)}`);
      const ran = records[0] ?? {};
      const bound = (ran.arguments ?? ran) as Json;
      const differing = Object.keys(args).filter((key) => !same(bound[key], args[key]));
      checks.add('sep-2848-binding-checked-before-execution', 'what ran is the approved call', differing.length ? `differs in ${differing.join(', ')}: ${JSON.stringify(ran)}` : undefined);
      const problem = executedBodyProblem(bodyText(result)) ?? (ENVELOPE in meta(result) ? 'the executed result carries the denial envelope' : undefined);
      checks.add('sep-2848-body-states-outcome', 'the executed body does not say the tool did not run', problem);
    });
  }
}

export class ToolApprovalTerminalDenialScenario implements ClientScenario {
  name = 'tool-approval-terminal-denial-body';
  source = SOURCE;
  description = `Denied out of band, the task completes with an isError CallToolResult marked denied-not-executed whose body says so; nothing runs.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const value = nonce();
    return attempt(run, checks, 'sep-2848-disposition-in-result-meta', 'denied, it completes as a denial', async () => {
      const { task } = await decided(run, 'deny', value);
      const runs = (await run.executions(value)).length;
      const result = (task.result ?? {}) as Json;
      const disposition = meta(result)[DISPOSITION];
      let problem: string | undefined;
      if (runs) problem = `the denied tool ran ${runs} time(s)`;
      else if (task.status !== 'completed') problem = `the denied task ended ${String(task.status)}`;
      else if (result.isError !== true) problem = 'not isError';
      checks.add('sep-2848-disposition-in-result-meta', 'completed, isError, denied-not-executed', problem ?? (disposition === 'denied-not-executed' ? undefined : `disposition ${String(disposition)}`));
      checks.add('sep-2848-body-states-outcome', 'the body states the tool did not run', denialBodyProblem(bodyText(result)));
      const discovered = await run.one.request('server/discover');
      const extensions = (discovered.result?.capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions ?? {};
      const envelope = meta(result)[ENVELOPE] as Json | undefined;
      if (DENIALS in extensions) {
        checks.add('sep-2848-body-disposition-envelope-agree', 'the envelope says unavailable', envelope?.remediation === 'unavailable' ? undefined : `envelope ${JSON.stringify(envelope ?? null)}`);
      }
    });
  }
}

export class ToolApprovalChangedEnvelopeScenario implements ClientScenario {
  name = 'tool-approval-changed-envelope-needs-approval';
  source = SOURCE;
  description = `After an approval, the call with changed arguments, and the same call by another principal, each need an approval of their own: neither runs on the first one.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const value = nonce();
    return attempt(run, checks, 'sep-2848-no-steering', 'changed calls need their own approval', async () => {
      const { args } = await decided(run, 'approve', value);
      const before = (await run.executions(value)).length;
      const changed = await run.open(run.one, run.arguments(value, true));
      const other = await run.open(run.other, args);
      await sleep(run.fx.settleMs);
      const after = (await run.executions(value)).length;
      const direct = [changed.reply, other.reply].find((reply) => reply.result?.resultType !== 'task' && !reply.error && reply.result?.isError !== true);
      let problem: string | undefined;
      if (after !== before) problem = `${after - before} more run(s) under the earlier approval`;
      else if (direct) problem = `answered as executed: ${direct.brief()}`;
      checks.add('sep-2848-no-steering', 'changed calls need their own approval', problem, { changed: changed.reply.brief(), other: other.reply.brief() });
    });
  }
}

export class ToolApprovalCancelledScenario implements ClientScenario {
  name = 'tool-approval-cancelled-task-never-executes';
  source = SOURCE;
  description = `A cancelled task never runs, even when its request is approved afterwards; tasks/cancel is an empty acknowledgement.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    const value = nonce();
    return attempt(run, checks, 'sep-2848-never-executed-and-cancelled', 'cancelled, and never run', async () => {
      const args = run.arguments(value);
      const { reply, taskId } = await run.open(run.one, args);
      if (!taskId) throw new Error(`the gated call did not return a task: ${reply.brief()}`);
      const cancel = await run.one.cancel(taskId);
      await run.decide('approve', args, taskId, false);
      await sleep(run.fx.settleMs);
      const status = (await run.status(taskId)).status;
      const runs = (await run.executions(value)).length;
      const ack = cancel.result ?? {};
      const extra = Object.keys(ack).filter((key) => key !== 'resultType' && key !== '_meta');
      checks.add('sep-2663-cancel-ack', 'tasks/cancel answers an empty result', cancel.result && !extra.length ? undefined : `tasks/cancel answered ${cancel.brief()}`);
      checks.add('sep-2848-never-executed-and-cancelled', 'cancelled, and never run', status === 'cancelled' && !runs ? undefined : `status ${String(status)}, ${runs} run(s)`);
    });
  }
}

export class ToolApprovalNoBackendArtifactsScenario implements ClientScenario {
  name = 'tool-approval-no-backend-artifacts';
  source = SOURCE;
  description = `No answer, through creation, polling and the result, carries the backend's binding material, request ids or endpoints.`;

  async run(serverUrl: string): Promise<ConformanceCheck[]> {
    const checks = new Checks();
    const run = new Run(serverUrl);
    return attempt(run, checks, 'sep-2848-no-backend-artifacts', 'no backend artifact in any answer', async () => {
      await decided(run, 'approve', nonce());
      const wanted = ['binding_token', 'evaluation_id', ...run.backendIds, ...run.fx.artifacts];
      const leaked = wanted.filter((item) => run.seen.some((text) => text.includes(item)));
      checks.add('sep-2848-no-backend-artifacts', 'no backend artifact in any answer', leaked.length ? `answers carried ${leaked.join(', ')}` : undefined, { searched: wanted.length, answers: run.seen.length });
      checks.add('sep-2848-retrieval-no-artifacts', 'result retrieval exposes no backend artifact', leaked.length ? `answers carried ${leaked.join(', ')}` : undefined);
    });
  }
}
