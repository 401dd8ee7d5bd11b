import { ApiError } from './api';
import type { Translate } from './i18n';

export function errorMessage(e: unknown, t: Translate): string {
  if (e instanceof ApiError) {
    if (e.network) return t('common.networkError', { message: e.message });
    // "authorization failed!": say what it means for the person at the console
    if (e.status === 403 && !e.sessionExpired) return t('common.forbidden', { message: e.message });
    return e.message;
  }
  if (e instanceof Error) return e.message;
  return String(e);
}

export function num(n: number | null | undefined): string {
  if (n === null || n === undefined || Number.isNaN(n)) return '—';
  if (Number.isInteger(n)) return String(n);
  return String(Math.round(n * 1000) / 1000);
}

/** A protection threshold: one at or below 0 turns protection off, and says so. */
export function threshold(n: number | null | undefined, t: Translate): string {
  if (n === null || n === undefined || Number.isNaN(n)) return '—';
  return n > 0 ? num(n) : `${num(n)} (${t('svc.thresholdOff')})`;
}

export function truthy(v: string | boolean | undefined | null): boolean {
  return v === true || v === 'true';
}

export function clock(d: Date): string {
  const p = (x: number) => String(x).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Local date and time, `2025-11-29 14:03:07`. */
export function dateTime(d: Date): string {
  const p = (x: number) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${clock(d)}`;
}

/** The time of day when `d` is today, else the date and time. */
export function moment(d: Date, now: Date): string {
  return d.toDateString() === now.toDateString() ? clock(d) : dateTime(d);
}

/** How long before `now` the instant `ms` was, in the largest whole unit. */
export function ago(ms: number, now: number, t: Translate): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 5) return t('time.justNow');
  if (s < 60) return t('time.secondsAgo', { count: s });
  if (s < 3600) return t('time.minutesAgo', { count: Math.floor(s / 60) });
  if (s < 86400) return t('time.hoursAgo', { count: Math.floor(s / 3600) });
  return t('time.daysAgo', { count: Math.floor(s / 86400) });
}
