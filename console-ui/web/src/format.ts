import { ApiError } from './api';
import type { Translate } from './i18n';

/**
 * What went wrong, for the person at the console. Known answers of the server (by status,
 * and for a 400 or 503 by the shape of its text) become a sentence in the console's
 * language that keeps the server's own English text as detail; the English dictionary
 * words them as that text alone, so the English console shows the server's text verbatim.
 */
export function errorMessage(e: unknown, t: Translate): string {
  if (e instanceof ApiError) {
    const message = e.message;
    if (e.switched) return t('err.switched', { message });
    if (e.network) return t('common.networkError', { message });
    if (e.sessionExpired) return t('err.session', { message });
    // "authorization failed!": say what it means for the person at the console
    if (e.status === 403) return t('common.forbidden', { message });
    if (e.status === 400) {
      const param = /Param '([^']+)' is illegal/i.exec(message)?.[1];
      return param ? t('err.illegalParam', { param, message }) : t('err.badRequest', { message });
    }
    if (e.status === 401) return t('err.unauthorized', { message });
    if (e.status === 404) return t('err.notFound', { message });
    if (e.status === 409) return t('err.conflict', { message });
    if (e.status === 429) return t('err.tooMany', { message });
    if (e.status === 503) return /leader/i.test(message) ? t('err.noLeader', { message }) : t('err.unavailable', { message });
    if (e.status >= 500) return t('err.server', { message });
    return message;
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
