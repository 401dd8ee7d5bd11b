// A line diff of two texts (Myers' O((N+M)·D) algorithm), for showing what a
// publication changes before it is made.
//
// The common head and tail are taken off first, so a small edit to a large file costs
// little. Myers keeps one frontier per edit step; past MAX_EDITS steps the middle is
// shown as replaced wholesale rather than aligned (a 1 MiB rewrite must not freeze the page).

/** One line of a diff: kept, added (only in the new text) or removed (only in the old). */
export interface DiffLine {
  kind: 'same' | 'add' | 'del';
  text: string;
  /** line number in the old text (same, del), from 1 */
  oldNo?: number;
  /** line number in the new text (same, add), from 1 */
  newNo?: number;
}

export interface Diff {
  lines: DiffLine[];
  added: number;
  removed: number;
  /** the middle was too different to align: shown as removed, then added */
  approximate: boolean;
}

/** Edit steps explored before giving up on aligning (memory grows with its square). */
const MAX_EDITS = 1500;

/**
 * The lines of `text`. A final newline ends the last line rather than starting an empty
 * one; a last line without it keeps a '\n' of its own, so that adding or dropping the
 * final newline shows as a change of that line (no line holds a '\n' otherwise).
 */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  else lines[lines.length - 1] += '\n';
  return lines;
}

/** Whether a diff line is a last line without a final newline. */
export function missingEol(text: string): boolean {
  return text.endsWith('\n');
}

/** The lines of `before` and `after`, each marked kept, added or removed, in order. */
export function diffLines(before: string, after: string): Diff {
  const a = splitLines(before);
  const b = splitLines(after);
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const midA = a.slice(head, a.length - tail);
  const midB = b.slice(head, b.length - tail);

  let ops = myers(midA, midB, MAX_EDITS);
  const approximate = ops === null;
  if (ops === null) ops = [...midA.map(() => 'del' as const), ...midB.map(() => 'add' as const)];

  const lines: DiffLine[] = [];
  let i = 0;
  let j = 0;
  const same = () => {
    lines.push({ kind: 'same', text: a[i], oldNo: i + 1, newNo: j + 1 });
    i++;
    j++;
  };
  for (let k = 0; k < head; k++) same();
  let added = 0;
  let removed = 0;
  for (const op of ops) {
    if (op === 'same') same();
    else if (op === 'del') {
      lines.push({ kind: 'del', text: a[i], oldNo: i + 1 });
      i++;
      removed++;
    } else {
      lines.push({ kind: 'add', text: b[j], newNo: j + 1 });
      j++;
      added++;
    }
  }
  for (let k = 0; k < tail; k++) same();
  return { lines, added, removed, approximate };
}

type Op = 'same' | 'add' | 'del';

/**
 * The shortest edit script from `a` to `b`, or null when it needs more than `maxEdits`
 * insertions and deletions. Deletions come before insertions where both are possible.
 */
function myers(a: string[], b: string[], maxEdits: number): Op[] | null {
  const n = a.length;
  const m = b.length;
  if (n === 0) return b.map(() => 'add');
  if (m === 0) return a.map(() => 'del');
  const max = n + m;
  const offset = max + 1;
  // v[offset + k]: the furthest x reached on diagonal k (y = x - k)
  const v = new Int32Array(2 * max + 3);
  // frontier at the start of step d, diagonals -d..d (index k + d)
  const trace: Int32Array[] = [];
  const limit = Math.min(max, maxEdits);
  for (let d = 0; d <= limit; d++) {
    trace.push(v.slice(offset - d, offset + d + 1));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, n, m);
    }
  }
  return null;
}

function backtrack(trace: Int32Array[], n: number, m: number): Op[] {
  const out: Op[] = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const at = (k: number) => trace[d][k + d];
    const k = x - y;
    let prevX = 0;
    let prevY = 0;
    if (d > 0) {
      const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
      prevX = at(prevK);
      prevY = prevX - prevK;
    }
    while (x > prevX && y > prevY) {
      out.push('same');
      x--;
      y--;
    }
    if (d > 0) out.push(x === prevX ? 'add' : 'del');
    x = prevX;
    y = prevY;
  }
  return out.reverse();
}

/** A run of diff lines to show, or a run of unchanged lines folded away. */
export type Hunk = { kind: 'lines'; lines: DiffLine[] } | { kind: 'gap'; lines: DiffLine[] };

/** Splits a diff into changes with `context` unchanged lines around them and folded gaps. */
export function fold(lines: DiffLine[], context = 3): Hunk[] {
  const keep = lines.map(() => false);
  lines.forEach((l, i) => {
    if (l.kind === 'same') return;
    for (let k = Math.max(0, i - context); k <= Math.min(lines.length - 1, i + context); k++) keep[k] = true;
  });
  const out: Hunk[] = [];
  let run: DiffLine[] = [];
  let runKept = true;
  lines.forEach((l, i) => {
    if (run.length > 0 && keep[i] !== runKept) {
      out.push({ kind: runKept ? 'lines' : 'gap', lines: run });
      run = [];
    }
    runKept = keep[i];
    run.push(l);
  });
  if (run.length > 0) out.push({ kind: runKept ? 'lines' : 'gap', lines: run });
  // a gap of one line costs as much room as its fold: show it
  return out.reduce<Hunk[]>((acc, h) => {
    const last = acc[acc.length - 1];
    const asLines = h.kind === 'lines' || h.lines.length <= 1;
    if (asLines && last?.kind === 'lines') last.lines.push(...h.lines);
    else acc.push(asLines ? { kind: 'lines', lines: h.lines } : h);
    return acc;
  }, []);
}
