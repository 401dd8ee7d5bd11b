// Live updates: the server-sent event stream GET /api/v1/events, with a
// fallback to polling every 2 s while the stream is unavailable.
//
// Events say what changed, not how: a page refetches what it shows.
//   service   {namespaceId, groupName, serviceName}
//   namespace {namespaceId}
//   user      {}          (admins only)
//   task      {name}      (admins only)
//   resync    {}          anything may have changed: refetch everything
import { useEffect, useRef, useState } from 'react';
import { sessionToken } from './auth';
import { useEndpoint } from './endpoint';

export interface ServiceEvent {
  namespaceId: string;
  groupName: string;
  serviceName: string;
}

export interface NamespaceEvent {
  namespaceId: string;
}

export interface TaskEvent {
  name: string;
}

export type LiveMode = 'connecting' | 'live' | 'polling';

/** What a page does on one kind of event. */
export interface Follow<E> {
  /** refetch what the page shows of this kind */
  refresh: () => void | Promise<void>;
  /** whether an event concerns the page (default: every event of the kind) */
  matches?: (ev: E) => boolean;
}

/** The kinds of change a page follows; one stream serves them all. */
export interface Follows {
  service?: Follow<ServiceEvent>;
  namespace?: Follow<NamespaceEvent>;
  user?: Follow<Record<string, never>>;
  task?: Follow<TaskEvent>;
}

type Kind = keyof Follows;
const KINDS: Kind[] = ['service', 'namespace', 'user', 'task'];

const DEBOUNCE_MS = 200;
const POLL_MS = 2000;
const RETRY_STREAM_MS = 15000;

/**
 * Keeps what a page shows current. Each followed kind's `refresh` is called
 * (debounced, never two at once) on its matching events, and every one on
 * `resync`; while the stream is down they are called every 2 s instead, and
 * once more when the stream comes back.
 *
 * `namespaceId` limits `service` events to one namespace; `enabled: false`
 * does not connect (yet).
 */
export function useLive(follows: Follows, opts: { namespaceId?: string; enabled?: boolean } = {}): LiveMode {
  const { namespaceId, enabled = true } = opts;
  const [mode, setMode] = useState<LiveMode>('connecting');
  const followsRef = useRef(follows);
  followsRef.current = follows;
  const kinds = KINDS.filter((k) => follows[k] !== undefined).join(',');
  // the stream follows the console to another member (endpoint.ts)
  const base = useEndpoint().current.base;

  useEffect(() => {
    if (!enabled || kinds === '') return;
    const followed = kinds.split(',') as Kind[];
    let disposed = false;
    let es: EventSource | null = null;
    let pollTimer = 0;
    let retryTimer = 0;
    let everFailed = false;
    const debounceTimers = new Map<Kind, number>();
    // per kind: a refresh is running / another one is wanted after it
    const running = new Set<Kind>();
    const again = new Set<Kind>();

    const runRefresh = async (kind: Kind) => {
      if (running.has(kind)) {
        // the running fetch may have left before this change: fetch once more after it
        again.add(kind);
        return;
      }
      running.add(kind);
      try {
        await followsRef.current[kind]?.refresh();
      } catch {
        /* the page shows its own errors */
      } finally {
        running.delete(kind);
      }
      if (again.delete(kind) && !disposed) void runRefresh(kind);
    };

    const schedule = (kind: Kind) => {
      if (debounceTimers.has(kind)) return;
      debounceTimers.set(
        kind,
        window.setTimeout(() => {
          debounceTimers.delete(kind);
          if (!disposed) void runRefresh(kind);
        }, DEBOUNCE_MS),
      );
    };
    const scheduleAll = () => followed.forEach(schedule);

    const stopPolling = () => {
      if (pollTimer) window.clearInterval(pollTimer);
      pollTimer = 0;
    };

    const startPolling = () => {
      if (pollTimer) return;
      pollTimer = window.setInterval(() => {
        if (!disposed) followed.forEach((k) => void runRefresh(k));
      }, POLL_MS);
    };

    const open = () => {
      if (disposed) return;
      const token = sessionToken();
      if (typeof EventSource === 'undefined' || !token) {
        setMode('polling');
        startPolling();
        return;
      }
      const qs = new URLSearchParams({ kinds, accessToken: token });
      if (namespaceId !== undefined) qs.set('namespaceId', namespaceId);
      const src = new EventSource(`${base}/api/v1/events?${qs.toString()}`);
      es = src;
      src.addEventListener('open', () => {
        if (disposed) return;
        setMode('live');
        stopPolling();
        // anything may have changed while the stream was down
        if (everFailed) scheduleAll();
      });
      for (const kind of followed) {
        src.addEventListener(kind, (e) => {
          const matches = followsRef.current[kind]?.matches as ((ev: unknown) => boolean) | undefined;
          if (!matches) return schedule(kind);
          try {
            if (matches(JSON.parse((e as MessageEvent<string>).data))) schedule(kind);
          } catch {
            schedule(kind);
          }
        });
      }
      src.addEventListener('resync', scheduleAll);
      src.onerror = () => {
        if (disposed) return;
        // Close instead of letting EventSource retry with a possibly stale
        // token; poll meanwhile and try the stream again later.
        src.close();
        if (es === src) es = null;
        everFailed = true;
        setMode('polling');
        startPolling();
        window.clearTimeout(retryTimer);
        retryTimer = window.setTimeout(open, RETRY_STREAM_MS);
      };
    };

    setMode('connecting');
    open();
    return () => {
      disposed = true;
      es?.close();
      debounceTimers.forEach((t) => window.clearTimeout(t));
      window.clearTimeout(retryTimer);
      stopPolling();
    };
  }, [enabled, namespaceId, kinds, base]);

  return mode;
}
