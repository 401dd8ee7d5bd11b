// localStorage that never throws (private mode, disabled storage).
export function load(key: string): string | null {
  try {
    return window.localStorage.getItem(key);
  } catch {
    return null;
  }
}

export function save(key: string, value: string | null): void {
  try {
    if (value === null) window.localStorage.removeItem(key);
    else window.localStorage.setItem(key, value);
  } catch {
    /* storage unavailable: the setting lasts for this page only */
  }
}

export const KEYS = {
  session: 'roster.console.session',
  lang: 'roster.console.lang',
  namespace: 'roster.console.namespace',
  hideEmpty: 'roster.console.hideEmptyServices',
  pageSize: 'roster.console.pageSize',
  configBlur: 'roster.console.configBlur',
} as const;
