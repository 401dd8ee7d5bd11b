// Gray releases of a configuration item (Nacos' beta and tag versions) through the v1
// config API: a version of the content for some clients only, beside the formal one —
// a beta for listed client IPs, or a version for the clients carrying a tag.
//
// The API lists every gray version of an item (roster's `grays=true`), the beta first;
// the item's history names each gray publication (`grayName`: `beta`, `tag_<tag>`).
import { call, type ConfigBeta } from './api';
import { instant, tenantOf, type ConfigRef } from './configs';
import type { Translate } from './i18n';

const CONFIGS = '/nacos/v1/cs/configs';

/** The name of the beta gray version. */
export const BETA = 'beta';

/** Most gray versions an item holds (the server refuses more with a 409). */
export const MAX_GRAYS = 10;

/** A live gray version. */
export interface GrayVersion {
  /** `beta`, or `tag_<tag>` */
  name: string;
  kind: 'beta' | 'tag';
  /** a beta's client IPs */
  ips: string[];
  /** a tag version's tag */
  tag: string;
  content: string;
  md5: string;
  modified: Date | null;
  by: string;
}

function keyParams(ref: ConfigRef) {
  return { dataId: ref.dataId, group: ref.group, tenant: tenantOf(ref.namespaceId) };
}

/** The tag of a gray name (`tag_canary` → `canary`); null for the beta or a formal row. */
export function tagOfGrayName(name: string | undefined): string | null {
  return name && name.startsWith('tag_') ? name.slice(4) : null;
}

/** The item's beta; null when it has none. */
export async function fetchBeta(ref: ConfigRef): Promise<GrayVersion | null> {
  const r = await call<{ data?: ConfigBeta | null }>('GET', CONFIGS, { ...keyParams(ref), beta: true });
  const b = r && typeof r === 'object' ? r.data : null;
  if (!b) return null;
  return {
    name: BETA,
    kind: 'beta',
    ips: splitIps(b.betaIps),
    tag: '',
    content: b.content ?? '',
    md5: b.md5,
    modified: instant(b.modifyTime ?? b.lastModified),
    by: b.createUser ?? '',
  };
}

/** A gray version as `grays=true` lists it. */
interface GrayRow {
  grayName: string;
  type: string;
  expr: string;
  content: string;
  md5: string;
  modifyTime?: number;
  modifyUser?: string;
}

/** The item's live tag versions, by tag, from the server's list of its gray versions. */
export async function fetchTagVersions(ref: ConfigRef): Promise<GrayVersion[]> {
  const r = await call<{ data?: GrayRow[] | null }>('GET', CONFIGS, { ...keyParams(ref), grays: true });
  const rows = r && typeof r === 'object' && Array.isArray(r.data) ? r.data : [];
  return rows
    .filter((g) => g.type === 'tag')
    .map((g) => ({
      name: g.grayName,
      kind: 'tag' as const,
      ips: [],
      tag: g.expr,
      content: g.content ?? '',
      md5: g.md5,
      modified: instant(g.modifyTime),
      by: g.modifyUser ?? '',
    }))
    .sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
}

/** Where a gray version goes: a beta for client IPs, or a tag. */
export type GrayTarget = { kind: 'beta'; ips: string[] } | { kind: 'tag'; tag: string };

/**
 * Publishes `content` as a gray version of `ref`. With `casMd5`, only over the version
 * of that md5 (409 when it changed meanwhile); without, a new one is refused (409) when
 * the item holds {@link MAX_GRAYS} already.
 */
export async function publishGray(ref: ConfigRef, target: GrayTarget, content: string, casMd5?: string): Promise<void> {
  const rule = target.kind === 'beta' ? { betaIps: target.ips.join(',') } : { tag: target.tag };
  await call('POST', CONFIGS, { ...keyParams(ref), ...rule, content, casMd5 });
}

/** Stops the beta, or removes a tag version; the formal content stays. */
export async function removeGray(ref: ConfigRef, gray: Pick<GrayVersion, 'kind' | 'tag'>): Promise<void> {
  const which = gray.kind === 'beta' ? { beta: true } : { tag: gray.tag };
  await call('DELETE', CONFIGS, { ...keyParams(ref), ...which });
}

/** The client IPs of a comma-separated list: trimmed, no blanks, no repeats. */
export function splitIps(raw: string | undefined): string[] {
  const out: string[] = [];
  for (const s of (raw ?? '').split(',')) {
    const ip = s.trim();
    if (ip && !out.includes(ip)) out.push(ip);
  }
  return out;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** An IPv4 or IPv6 address, as the server reads one. */
export function isIp(s: string): boolean {
  if (IPV4.test(s)) return true;
  if (!s.includes(':') || /[^0-9A-Fa-f:.]/.test(s)) return false;
  try {
    // the URL parser reads IPv6 literals strictly
    new URL(`http://[${s}]/`);
    return true;
  } catch {
    return false;
  }
}

/** At most this many client IPs in a beta (the server's limit). */
const MAX_BETA_IPS = 1000;

export function betaIpsRules(t: Translate) {
  return [
    {
      validator: async (_: unknown, v?: string) => {
        const ips = splitIps(v);
        if (ips.length === 0) throw new Error(t('gray.ipsRequired'));
        const bad = ips.find((ip) => !isIp(ip));
        if (bad !== undefined) throw new Error(t('gray.ipsInvalid', { ip: bad }));
        if (ips.length > MAX_BETA_IPS) throw new Error(t('gray.ipsTooMany', { max: MAX_BETA_IPS }));
      },
    },
  ];
}

const TAG = /^[A-Za-z0-9_.:-]{1,64}$/;

export function grayTagRules(t: Translate) {
  return [
    { required: true, whitespace: true, message: t('gray.tagRequired') },
    {
      validator: async (_: unknown, v?: string) => {
        const s = (v ?? '').trim();
        if (s && !TAG.test(s)) throw new Error(t('gray.tagInvalid'));
      },
    },
  ];
}
