import { createContext, useCallback, useContext, useEffect, useRef, useState } from 'react';
import type { TablePaginationConfig } from 'antd';
import { useT } from './i18n';

export interface Resource<T> {
  data: T | undefined;
  error: unknown;
  /** true while a visible (non-silent) load runs */
  loading: boolean;
  /** refetch; silent keeps the current data on screen without a spinner */
  reload(opts?: { silent?: boolean }): Promise<void>;
  setData(d: T): void;
}

/**
 * Bumped when the navigation item (or header link) of the page already shown is
 * clicked: every resource of the page loads again, as if the page were opened.
 */
export const NavRefresh = createContext(0);

/**
 * Loads `loader()` whenever `deps` change, and again when the page's navigation
 * item is clicked ({@link NavRefresh}). Answers to superseded requests are
 * dropped, so a slow old answer never overwrites a newer one.
 */
export function useResource<T>(loader: () => Promise<T>, deps: unknown[]): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const seq = useRef(0);
  const loaderRef = useRef(loader);
  loaderRef.current = loader;
  const mounted = useRef(true);

  const reload = useCallback(async (opts: { silent?: boolean } = {}) => {
    const my = ++seq.current;
    if (!opts.silent) setLoading(true);
    try {
      const d = await loaderRef.current();
      if (!mounted.current || my !== seq.current) return;
      setData(d);
      setError(undefined);
    } catch (e) {
      if (!mounted.current || my !== seq.current) return;
      setError(e);
    } finally {
      if (mounted.current && my === seq.current) setLoading(false);
    }
  }, []);

  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);

  useEffect(() => {
    setData(undefined);
    setError(undefined);
    void reload();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);

  // A click on the current page's navigation item: reload, keeping what is shown.
  const nav = useContext(NavRefresh);
  const navSeen = useRef(nav);
  useEffect(() => {
    if (navSeen.current === nav) return;
    navSeen.current = nav;
    void reload();
  }, [nav, reload]);

  return { data, error, loading, reload, setData };
}

/** The current time, renewed every `ms` (for texts such as "5 s ago"). */
export function useNow(ms: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), ms);
    return () => window.clearInterval(timer);
  }, [ms]);
  return now;
}

/** Calls fn every `ms` while enabled, never overlapping runs. */
export function useInterval(fn: () => Promise<void> | void, ms: number, enabled: boolean): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (!enabled) return;
    let stopped = false;
    let timer = 0;
    const tick = async () => {
      try {
        await fnRef.current();
      } finally {
        if (!stopped) timer = window.setTimeout(tick, ms);
      }
    };
    timer = window.setTimeout(tick, ms);
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
  }, [ms, enabled]);
}

export interface Dialog<T> {
  open: boolean;
  /** the last target shown; kept while the dialog fades out */
  target: T | undefined;
  show(target: T): void;
  hide(): void;
}

export function useDialog<T>(): Dialog<T> {
  const [state, setState] = useState<{ open: boolean; target: T | undefined }>({ open: false, target: undefined });
  const show = useCallback((target: T) => setState({ open: true, target }), []);
  const hide = useCallback(() => setState((s) => ({ open: false, target: s.target })), []);
  return { open: state.open, target: state.target, show, hide };
}

/** value, settled for `ms` */
export function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const timer = window.setTimeout(() => setV(value), ms);
    return () => window.clearTimeout(timer);
  }, [value, ms]);
  return v;
}

export interface Paging {
  page: number;
  pageSize: number;
  setPage: (page: number) => void;
  /** antd pagination for a table of `total` rows; `extra` overrides the defaults. */
  pagination: (total: number, extra?: TablePaginationConfig) => TablePaginationConfig;
}

/** A table's page and page size; a new page size starts again at page 1. */
export function usePaging(initialSize = 10, onSizeChange?: (size: number) => void): Paging {
  const t = useT();
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(initialSize);
  const pagination = (total: number, extra?: TablePaginationConfig): TablePaginationConfig => ({
    current: page,
    pageSize,
    total,
    hideOnSinglePage: true,
    showSizeChanger: true,
    showTotal: (n) => t('common.total', { count: n }),
    onChange: (p, s) => {
      if (s !== pageSize) {
        setPageSize(s);
        onSizeChange?.(s);
        setPage(1);
      } else setPage(p);
    },
    ...extra,
  });
  return { page, pageSize, setPage, pagination };
}
