/**
 * SEP-2848 Tool Approval: the server scenarios, in the order they run. In the suite's repository
 * they join the server scenario list (`src/scenarios/index.ts`), tagged with the extension.
 */

import { ClientScenario } from '../../../types';
import {
  ToolApprovalAtMostOnceScenario,
  ToolApprovalCancelledScenario,
  ToolApprovalChangedEnvelopeScenario,
  ToolApprovalNoBackendArtifactsScenario,
  ToolApprovalTerminalDenialScenario
} from './decided';
import {
  ToolApprovalDeclaresExtensionsScenario,
  ToolApprovalEnvelopeWhilePendingScenario,
  ToolApprovalNoTasksClientScenario,
  ToolApprovalRequestableDenialScenario,
  ToolApprovalTaskAccessScenario
} from './pending';

export const toolApprovalScenarios: ClientScenario[] = [
  new ToolApprovalDeclaresExtensionsScenario(),
  new ToolApprovalNoTasksClientScenario(),
  new ToolApprovalRequestableDenialScenario(),
  new ToolApprovalEnvelopeWhilePendingScenario(),
  new ToolApprovalTaskAccessScenario(),
  new ToolApprovalAtMostOnceScenario(),
  new ToolApprovalTerminalDenialScenario(),
  new ToolApprovalChangedEnvelopeScenario(),
  new ToolApprovalCancelledScenario(),
  new ToolApprovalNoBackendArtifactsScenario()
];
