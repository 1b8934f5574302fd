/**
 * Runs the tool-approval module's scenarios against a server, as the suite's `server` command
 * runs its own: one `server-<scenario>-<timestamp>/checks.json` per scenario under `-o DIR`, a line
 * per scenario, exit 1 when a check failed. (The suite's npm package ships a bundle that cannot
 * load scenarios from outside it; this runner stands in for it until the module is merged.)
 *
 * Usage: node dist/runner/run.js --url URL -o DIR [--scenario NAME]
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { toolApprovalScenarios } from '../src/scenarios/server/tool-approval';
import { ConformanceCheck } from '../src/types';

function option(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index === -1 ? undefined : process.argv[index + 1];
}

async function main(): Promise<number> {
  const url = option('--url');
  const out = option('-o');
  const only = option('--scenario');
  if (!url || !out) {
    console.error('usage: run.js --url URL -o DIR [--scenario NAME]');
    return 2;
  }
  let failed = 0;
  for (const scenario of toolApprovalScenarios.filter((item) => !only || item.name === only)) {
    let checks: ConformanceCheck[];
    try {
      checks = await scenario.run(url);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      checks = [{ id: `${scenario.name}-run`, name: scenario.name, description: scenario.description, status: 'FAILURE', timestamp: new Date().toISOString(), errorMessage: message }];
    }
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const directory = join(out, `server-${scenario.name}-${stamp}`);
    mkdirSync(directory, { recursive: true });
    writeFileSync(join(directory, 'checks.json'), JSON.stringify(checks, null, 2) + '\n');
    const failures = checks.filter((check) => check.status === 'FAILURE');
    failed += failures.length;
    console.log(`${failures.length ? '✗' : '✓'} ${scenario.name}: ${checks.map((check) => `${check.id} ${check.status}`).join(', ')}`);
    for (const failure of failures) console.log(`    ${failure.id}: ${failure.errorMessage ?? ''}`);
  }
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(2);
  }
);
