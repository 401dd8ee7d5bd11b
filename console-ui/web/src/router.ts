// A tiny hash router: #/path?query. The server only ever serves `/`.
import { useSyncExternalStore } from 'react';

export interface Route {
  path: string;
  segments: string[];
  query: URLSearchParams;
  /** the hash without '#', e.g. "/services?namespaceId=dev" */
  raw: string;
}

function subscribe(cb: () => void): () => void {
  window.addEventListener('hashchange', cb);
  return () => window.removeEventListener('hashchange', cb);
}

function snapshot(): string {
  return window.location.hash;
}

export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#/, '') || '/';
  const q = raw.indexOf('?');
  const path = q >= 0 ? raw.slice(0, q) : raw;
  const query = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : '');
  const segments = path
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  return { path: '/' + segments.join('/'), segments, query, raw };
}

export function useRoute(): Route {
  const hash = useSyncExternalStore(subscribe, snapshot);
  return parseHash(hash);
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  const target = '#' + to;
  if (window.location.hash === target) return;
  if (opts.replace) window.location.replace(target);
  else window.location.hash = to;
}

export function href(path: string, query?: Record<string, string | undefined>): string {
  let out = path;
  if (query) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, v);
    const s = qs.toString();
    if (s) out += '?' + s;
  }
  return out;
}

export function serviceHref(namespaceId: string, groupName: string, serviceName: string): string {
  return ['/service', namespaceId, groupName, serviceName].map((s, i) => (i === 0 ? s : encodeURIComponent(s))).join('/');
}
