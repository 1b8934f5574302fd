/**
 * The official conformance suite's scenario types, as its `src/types.ts` declares them (only what
 * the tool-approval module uses). In the suite's repository this file is the suite's own and the
 * module imports it from there; here it lets the module compile on its own.
 */

export type CheckStatus = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';

export interface SpecReference {
  id: string;
  url?: string;
}

export interface ConformanceCheck {
  id: string;
  name: string;
  description: string;
  status: CheckStatus;
  timestamp: string;
  specReferences?: SpecReference[];
  details?: Record<string, unknown>;
  errorMessage?: string;
  logs?: string[];
}

/** Where a scenario's requirement comes from: here, a protocol extension off the dated timeline. */
export type ScenarioSource = { extensionId: string };

/** A server scenario: the suite acts as the client of the server at `serverUrl`. */
export interface ClientScenario {
  name: string;
  description: string;
  source: ScenarioSource;
  run(serverUrl: string): Promise<ConformanceCheck[]>;
}
