import type { Translate } from './i18n';

export class MetadataError extends Error {}

/**
 * Parses what a user typed as metadata: a JSON object (values may be text,
 * numbers or booleans; they are sent as text) or one `key=value` per line.
 * Empty input is an empty map.
 */
export function parseMetadata(text: string, t: Translate): Record<string, string> {
  const src = text.trim();
  if (!src) return {};
  if (src.startsWith('{') || src.startsWith('[') || src.startsWith('"')) {
    let v: unknown;
    try {
      v = JSON.parse(src);
    } catch (e) {
      throw new MetadataError(t('meta.invalidJson', { message: e instanceof Error ? e.message : String(e) }));
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new MetadataError(t('meta.notObject'));
    const out: Record<string, string> = {};
    for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
      if (typeof val === 'string') out[k] = val;
      else if (typeof val === 'number' || typeof val === 'boolean') out[k] = String(val);
      else throw new MetadataError(t('meta.nested', { key: k }));
    }
    return out;
  }
  const out: Record<string, string> = {};
  src.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line) return;
    const eq = line.indexOf('=');
    if (eq < 0) throw new MetadataError(t('meta.badLine', { line: i + 1 }));
    const k = line.slice(0, eq).trim();
    if (!k) throw new MetadataError(t('meta.emptyKey', { line: i + 1 }));
    out[k] = line.slice(eq + 1).trim();
  });
  return out;
}

export function formatMetadata(m: Record<string, string> | undefined): string {
  if (!m || Object.keys(m).length === 0) return '';
  return JSON.stringify(m, null, 2);
}

/** An antd Form rule that checks metadata text. */
export function metadataRule(t: Translate) {
  return {
    validator: async (_: unknown, value: string | undefined) => {
      parseMetadata(value ?? '', t);
    },
  };
}

/** The metadata keys a sync task writes on each instance it imports (their provenance). */
export const PROVENANCE_KEYS = ['syncSource', 'sourceClusterId', 'sync.taskId', 'sync.sourceInstanceId', 'sync.instance.tag'];

/**
 * An imported instance's task and the rest of its metadata: the provenance keys shown as
 * one badge rather than five chips. `task` is null for an instance nobody imported.
 */
export function splitProvenance(m: Record<string, string> | undefined): { task: string | null; rest: Record<string, string> } {
  const meta = m ?? {};
  const task = meta['sync.taskId'] ?? null;
  if (task === null) return { task: null, rest: meta };
  const rest: Record<string, string> = {};
  for (const [k, v] of Object.entries(meta)) if (!PROVENANCE_KEYS.includes(k)) rest[k] = v;
  return { task, rest };
}
