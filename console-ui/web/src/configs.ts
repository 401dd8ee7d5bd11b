// Configuration items through Nacos' v1 config API (`/nacos/v1/cs/configs`, `/history`,
// `/listener`): what the console reads and writes, exports and imports (Nacos' zip), who
// listens, and the rules a form checks before the server does.
import {
  ApiError,
  call,
  fetchFile,
  type ConfigDetail,
  type ConfigImportResult,
  type ConfigListener,
  type ConfigPage,
  type ConfigVersion,
  type Instant,
  type Params,
} from './api';
import type { Translate } from './i18n';

const CONFIGS = '/nacos/v1/cs/configs';
const HISTORY = '/nacos/v1/cs/history';

/** The formats the editor offers (Nacos' console offers the same). */
export const CONFIG_TYPES = ['text', 'yaml', 'properties', 'json', 'xml', 'html'];

export const DEFAULT_GROUP = 'DEFAULT_GROUP';

/** Where an item lives: a namespace id (`public` included), a group and a dataId. */
export interface ConfigRef {
  namespaceId: string;
  group: string;
  dataId: string;
}

/** What the editor publishes besides the key. */
export interface ConfigFields {
  content: string;
  type: string;
  appName: string;
  desc: string;
  tags: string;
}

/** Nacos' tenant of a namespace: empty for public. */
export function tenantOf(namespaceId: string): string {
  return namespaceId === 'public' ? '' : namespaceId;
}

/** The row key of an item (and the browser test's handle on it); `/` is in neither name. */
export function configKey(r: { group: string; dataId: string }): string {
  return `${r.group}/${r.dataId}`;
}

function keyParams(ref: ConfigRef): Params {
  return { dataId: ref.dataId, group: ref.group, tenant: tenantOf(ref.namespaceId) };
}

/**
 * A page of the items of a namespace; `blur`: `*` patterns, a term without one matches a
 * part. roster's rows carry `modifyTime` and `modifyUser` beside Nacos' `ConfigInfo`.
 */
export async function searchConfigs(
  namespaceId: string,
  q: { dataId: string; group: string; blur: boolean },
  pageNo: number,
  pageSize: number,
): Promise<ConfigPage<ConfigDetail>> {
  const page = await call<ConfigPage<ConfigDetail>>('GET', CONFIGS, {
    // nothing typed lists everything, whichever way it matches
    search: q.blur || (!q.dataId && !q.group) ? 'blur' : 'accurate',
    dataId: q.dataId,
    group: q.group,
    tenant: tenantOf(namespaceId),
    pageNo,
    pageSize,
  });
  return page;
}

/** The item with all it records; null when there is none. */
export async function fetchConfig(ref: ConfigRef): Promise<ConfigDetail | null> {
  try {
    const d = await call<ConfigDetail>('GET', CONFIGS, { ...keyParams(ref), show: 'all' });
    return d && typeof d === 'object' ? d : null;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

/**
 * Publishes `fields` as item `ref`. With `casMd5`, only over the version of that md5:
 * the server answers 409 when the item changed meanwhile (or is gone).
 */
export async function publishConfig(ref: ConfigRef, fields: ConfigFields, casMd5?: string): Promise<void> {
  await call('POST', CONFIGS, {
    ...keyParams(ref),
    content: fields.content,
    type: fields.type,
    appName: fields.appName,
    desc: fields.desc,
    config_tags: fields.tags,
    casMd5,
  });
}

export async function removeConfig(ref: ConfigRef): Promise<void> {
  await call('DELETE', CONFIGS, keyParams(ref));
}

/** The versions of an item, newest first. */
export function fetchHistory(ref: ConfigRef, pageNo: number, pageSize: number): Promise<ConfigPage<ConfigVersion>> {
  return call<ConfigPage<ConfigVersion>>('GET', HISTORY, { search: 'accurate', ...keyParams(ref), pageNo, pageSize });
}

/** One version, with its content. */
export function fetchVersion(ref: ConfigRef, id: number | string): Promise<ConfigVersion> {
  return call<ConfigVersion>('GET', HISTORY, { nid: id, ...keyParams(ref) });
}

/**
 * Downloads the export of `namespaceId` (Nacos 2.x's zip), or of the items `ids` of it:
 * fetched with the session's token, then saved through a temporary link to a blob. Resolves
 * to the file's name.
 */
export async function downloadExport(namespaceId: string, ids: (number | string)[]): Promise<string> {
  const file = await fetchFile(CONFIGS, {
    exportV2: true,
    tenant: tenantOf(namespaceId),
    ids: ids.length > 0 ? ids.join(',') : undefined,
  });
  const name = file.filename ?? `config_export_${namespaceId}.zip`;
  const url = URL.createObjectURL(file.blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.style.display = 'none';
  document.body.appendChild(link);
  link.click();
  link.remove();
  // revoked once the browser has surely started saving it
  window.setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return name;
}

/** What to do with an imported item that exists already. */
export type ImportPolicy = 'ABORT' | 'SKIP' | 'OVERWRITE';

export const IMPORT_POLICIES: ImportPolicy[] = ['ABORT', 'SKIP', 'OVERWRITE'];

/**
 * Imports a zip (Nacos' export format) into `namespaceId` (admins). Refused as a whole
 * when an item is invalid (400, naming it) or, with ABORT, exists already (409, naming them).
 */
export async function importConfigs(namespaceId: string, file: File, policy: ImportPolicy): Promise<ConfigImportResult> {
  const form = new FormData();
  form.append('file', file, file.name);
  const r = await call<{ data?: ConfigImportResult }>(
    'POST',
    CONFIGS,
    { import: true, namespace: tenantOf(namespaceId), policy },
    { form },
  );
  return r?.data ?? { succCount: 0, skipCount: 0 };
}

/** Who listens to the item through the node the console talks to. */
export async function fetchListeners(ref: ConfigRef): Promise<ConfigListener[]> {
  const r = await call<{ listeners?: ConfigListener[] }>('GET', `${CONFIGS}/listener`, keyParams(ref));
  return r?.listeners ?? [];
}

/** Whether `e` is the server refusing a compare-and-set: the item changed meanwhile. */
export function isConflict(e: unknown): boolean {
  return e instanceof ApiError && e.status === 409;
}

/** An instant of the config API as a Date: milliseconds (a number or digits) or ISO 8601. */
export function instant(v: Instant | null | undefined): Date | null {
  if (v === null || v === undefined || v === '') return null;
  const ms = typeof v === 'number' ? v : /^\d+$/.test(v) ? Number(v) : Date.parse(v);
  return Number.isFinite(ms) ? new Date(ms) : null;
}

/** The tags as the server keeps them: trimmed, comma-separated, no empty ones. */
export function normalizeTags(tags: string | undefined): string {
  return (tags ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .join(',');
}

// Nacos' rules (the server checks them too, and names the field when it refuses).
const NAME = /^[A-Za-z0-9_.:-]+$/;
const TAG = /^[A-Za-z0-9_.: -]+$/;

export function dataIdRules(t: Translate) {
  return [
    { required: true, whitespace: true, message: t('cfg.dataIdRequired') },
    {
      validator: async (_: unknown, v?: string) => {
        const s = (v ?? '').trim();
        if (s && (s.length > 255 || !NAME.test(s))) throw new Error(t('cfg.dataIdInvalid'));
      },
    },
  ];
}

export function groupRules(t: Translate) {
  return [
    {
      validator: async (_: unknown, v?: string) => {
        const s = (v ?? '').trim();
        if (s && (s.length > 128 || !NAME.test(s))) throw new Error(t('cfg.groupInvalid'));
      },
    },
  ];
}

export function tagsRules(t: Translate) {
  return [
    {
      validator: async (_: unknown, v?: string) => {
        const tags = normalizeTags(v);
        if (!tags) return;
        const list = tags.split(',');
        if (list.length > 5 || list.some((s) => s.length > 64 || !TAG.test(s))) throw new Error(t('cfg.tagsInvalid'));
      },
    },
  ];
}

/** Content: not blank; JSON must parse when the format says JSON. */
export function contentRules(t: Translate, type: () => string) {
  return [
    { required: true, whitespace: true, message: t('cfg.contentRequired') },
    {
      validator: async (_: unknown, v?: string) => {
        if (!v || !v.trim() || type() !== 'json') return;
        try {
          JSON.parse(v);
        } catch (e) {
          throw new Error(t('cfg.jsonInvalid', { message: e instanceof Error ? e.message : String(e) }));
        }
      },
    },
  ];
}
