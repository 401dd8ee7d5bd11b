import { ApiError } from './api';
import type { Translate } from './i18n';

export function errorMessage(e: unknown, t: Translate): string {
  if (e instanceof ApiError) {
    if (e.network) return t('common.networkError', { message: e.message });
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

export function truthy(v: string | boolean | undefined | null): boolean {
  return v === true || v === 'true';
}

export function clock(d: Date): string {
  const p = (x: number) => String(x).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
