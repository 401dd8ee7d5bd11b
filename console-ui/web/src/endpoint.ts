// Which node the console talks to, and moving to another member when that one dies.
//
// The console is served by one node (its "home") and calls that node's API by relative
// paths. When a call gets no answer at all (the node is down or unreachable, not an
// HTTP error), the console asks the other members it knows of, one at a time, and
// carries on with the first that answers: its API at `<protocol>//<member's HTTP
// address>`, which the server allows cross-origin for members' addresses only. The
// token is valid on every member (the signing keys are replicated), so the session
// survives. It stays on that member until someone asks to switch back (the banner's
// button): flapping between nodes would make the pages jump between views.
//
// Members are learned from the node list (`learnMembers`), which the shell reads when
// it starts and every 15 s, so the list is at most that old when it is needed.
import { useSyncExternalStore } from 'react';

export interface Endpoint {
  /** '' for the home node (relative paths), else `<protocol>//<host:port>` */
  base: string;
  /** the member's id, once known */
  id: number | null;
  /** host:port as shown to the user */
  address: string;
}

export interface KnownMember {
  id: number;
  /** host:port of its HTTP API */
  http: string;
}

/** How long a member may take to answer the probe before the next one is asked. */
const PROBE_MS = 3000;

let home: Endpoint = { base: '', id: null, address: typeof window === 'undefined' ? '' : window.location.host };
let current: Endpoint = home;
/** the node the console left last, for the banner */
let left: Endpoint | null = null;
let members: KnownMember[] = [];
let probing: Promise<boolean> | null = null;
const listeners = new Set<() => void>();

function changed(): void {
  listeners.forEach((l) => l());
}

/** The base every API path is appended to ('' while on the home node). */
export function apiBase(): string {
  return current.base;
}

function baseOf(http: string): string {
  return `${window.location.protocol}//${http}`;
}

/**
 * Takes in the members a node listed, with their HTTP addresses. `from` is the base the
 * list came from; the member at that address is the node that answered, which names
 * the node the console talks to (when the console was opened at a member's own address;
 * behind a proxy it stays unnamed, and moving to another member is left to the proxy).
 */
export function learnMembers(from: string, list: { id: number; http?: string | null }[]): void {
  members = list.filter((m): m is KnownMember => typeof m.http === 'string' && m.http !== '');
  const address = from === '' ? home.address : current.address;
  const answering = members.find((m) => m.http === address);
  if (!answering) return;
  let update = false;
  if (from === '' && home.id !== answering.id) {
    home = { ...home, id: answering.id };
    if (current.base === '') current = home;
    update = true;
  }
  if (from !== '' && from === current.base && current.id !== answering.id) {
    current = { ...current, id: answering.id };
    update = true;
  }
  if (update) changed();
}

/** The members last learned (for the cluster page's per-member views). */
export function knownMembers(): KnownMember[] {
  return members;
}

/** The base of a member's API: '' for the home node. */
export function memberBase(m: KnownMember): string {
  return m.id === home.id || m.http === home.address ? '' : baseOf(m.http);
}

/**
 * `failedBase` gave no answer: find a member that does and talk to it from now on.
 * Answers whether the console now talks to another node (also when a concurrent call
 * already moved it). One probe runs at a time; calls failing meanwhile wait for it.
 */
export function failover(failedBase: string, token: string | null): Promise<boolean> {
  if (current.base !== failedBase) return Promise.resolve(true);
  if (probing) return probing;
  probing = probe(failedBase, token).finally(() => {
    probing = null;
  });
  return probing;
}

async function probe(failedBase: string, token: string | null): Promise<boolean> {
  const candidates = [...members].sort((a, b) => a.id - b.id).filter((m) => memberBase(m) !== failedBase);
  for (const m of candidates) {
    const base = memberBase(m);
    const signal = AbortSignal.timeout(PROBE_MS);
    try {
      const headers: Record<string, string> = { Accept: 'application/json' };
      if (token) headers.Authorization = `Bearer ${token}`;
      const res = await fetch(`${base}/api/v1/cluster`, { headers, cache: 'no-store', signal });
      if (!res.ok) continue;
      if (current.base !== failedBase) return true;
      left = current;
      current = { base, id: m.id, address: m.http };
      changed();
      return true;
    } catch {
      /* not this one */
    }
  }
  return false;
}

/** Back to the node that served the console (if it is still down, the next call moves on again). */
export function switchBack(): void {
  if (current.base === '') return;
  left = null;
  current = home;
  changed();
}

interface EndpointState {
  current: Endpoint;
  home: Endpoint;
  /** the node the console moved away from, while it is away */
  left: Endpoint | null;
}

let snapshotCache: EndpointState = { current, home, left };

function snapshot(): EndpointState {
  if (snapshotCache.current !== current || snapshotCache.home !== home || snapshotCache.left !== left) {
    snapshotCache = { current, home, left };
  }
  return snapshotCache;
}

function subscribe(cb: () => void): () => void {
  listeners.add(cb);
  return () => listeners.delete(cb);
}

/** The node the console talks to, re-rendering when it changes. */
export function useEndpoint(): EndpointState {
  return useSyncExternalStore(subscribe, snapshot);
}
