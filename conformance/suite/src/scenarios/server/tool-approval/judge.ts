/**
 * SEP-2848 Tool Approval: how a body is read against the outcome the structure states (the
 * status, `isError`, the disposition, the envelope). Generous: a body fails only when its words
 * contradict that outcome or say nothing of it.
 */

const NEGATION = /\b(not|no|never|nothing|none|neither|nor|without|cannot)\b|n't\b/i;
const NOT_RUN = /(\bnot|n't|\bnever)\s+(yet\s+|been\s+|be\s+|have\s+been\s+)?(run|ran|execut\w*|perform\w*|carried\s+out|call(ed)?|invok\w*)\b/i;
const DONE = /\b(completed|succeeded|executed|ran|performed|done|carried\s+out|went\s+through|transferred|paid|processed)\b/i;
const NOT_YET = /\b(will|would|once|when|if|after|before|until|unless|pending|awaiting|waiting|needs?|requires?|must|can|may|only)\b/i;
const WILL_RUN = /\b(will|shall)\s+(still\s+)?(be\s+)?(run|execut\w*|proceed|go\s+through|carried\s+out|sent|paid|processed|completed)\b/i;
const DENIED = /\b(denied|declined|rejected|refused|expired|withdrawn|cancell?ed|blocked|lapsed)\b/i;

function sentences(text: string): string[] {
  return text.split(/(?<=[.!?;:])\s+|\n+/).filter((part) => part.trim());
}

/** What is wrong with the body of an executed call, or undefined. */
export function executedBodyProblem(text: string): string | undefined {
  if (!text.trim()) return 'the body is empty: it does not state that the tool ran';
  if (NOT_RUN.test(text)) return `the body of an executed call says the tool did not run: ${JSON.stringify(text.slice(0, 160))}`;
  return undefined;
}

/** What is wrong with the body of a denial, or undefined. */
export function denialBodyProblem(text: string): string | undefined {
  const claim = sentences(text).find((s) => DONE.test(s) && !NEGATION.test(s) && !NOT_YET.test(s));
  if (claim) return `the denial's body claims the action happened: ${JSON.stringify(claim.slice(0, 160))}`;
  const later = sentences(text).find((s) => WILL_RUN.test(s) && !NEGATION.test(s));
  if (later) return `the denial's body says the call will still run: ${JSON.stringify(later.slice(0, 160))}`;
  if (!NEGATION.test(text) && !DENIED.test(text)) return `the body does not state that the tool did not run: ${JSON.stringify(text.slice(0, 160))}`;
  return undefined;
}
