// Live updates: the server-sent event stream GET /api/v1/events, with a
// fallback to polling every 2 s while the stream is unavailable.
import { useEffect, useRef, useState } from 'react';
import { sessionToken } from './auth';

export interface ServiceEvent {
  namespaceId: string;
  groupName: string;
  serviceName: string;
}

export type LiveMode = 'connecting' | 'live' | 'polling';

const DEBOUNCE_MS = 200;
const POLL_MS = 2000;
const RETRY_STREAM_MS = 15000;

/**
 * Keeps what a page shows current. `refresh` is called (debounced) on every
 * matching `service` event and on `resync`; while the stream is down it is
 * called every 2 s instead, and once more when the stream comes back.
 */
export function useLiveUpdates(
  namespaceId: string | undefined,
  matches: (ev: ServiceEvent) => boolean,
  refresh: () => void | Promise<void>,
): LiveMode {
  const [mode, setMode] = useState<LiveMode>('connecting');
  const matchRef = useRef(matches);
  matchRef.current = matches;
  const refreshRef = useRef(refresh);
  refreshRef.current = refresh;

  useEffect(() => {
    if (namespaceId === undefined) return;
    let disposed = false;
    let es: EventSource | null = null;
    let debounceTimer = 0;
    let pollTimer = 0;
    let retryTimer = 0;
    let everFailed = false;
    let refreshing = false;

    const runRefresh = async () => {
      if (refreshing) return;
      refreshing = true;
      try {
        await refreshRef.current();
      } catch {
        /* the page shows its own errors */
      } finally {
        refreshing = false;
      }
    };

    const schedule = () => {
      if (debounceTimer) return;
      debounceTimer = window.setTimeout(() => {
        debounceTimer = 0;
        if (!disposed) void runRefresh();
      }, DEBOUNCE_MS);
    };

    const stopPolling = () => {
      if (pollTimer) window.clearInterval(pollTimer);
      pollTimer = 0;
    };

    const startPolling = () => {
      if (pollTimer) return;
      pollTimer = window.setInterval(() => {
        if (!disposed) void runRefresh();
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
      const qs = new URLSearchParams({ namespaceId, accessToken: token });
      const src = new EventSource(`/api/v1/events?${qs.toString()}`);
      es = src;
      src.addEventListener('open', () => {
        if (disposed) return;
        setMode('live');
        stopPolling();
        // anything may have changed while the stream was down
        if (everFailed) schedule();
      });
      src.addEventListener('service', (e) => {
        try {
          const ev = JSON.parse((e as MessageEvent<string>).data) as ServiceEvent;
          if (matchRef.current(ev)) schedule();
        } catch {
          schedule();
        }
      });
      src.addEventListener('resync', () => schedule());
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
      window.clearTimeout(debounceTimer);
      window.clearTimeout(retryTimer);
      stopPolling();
    };
  }, [namespaceId]);

  return mode;
}
