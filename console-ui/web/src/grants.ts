// What roles and permissions mean, for the pages that show and grant them.
//
// A permission is a role, a resource pattern and an action. Resources are written
// as Nacos writes them, `namespaceId:group:naming/serviceName`, where `*` matches
// any run of characters; the console grants whole namespaces, `namespaceId:*:*`
// (Nacos writes the public namespace as an empty prefix: `:*:*` means it too).
import type { Action } from './api';
import type { MessageKey } from './i18n';

/** The admins' role: it passes every check and cannot be given permissions. */
export const ROLE_ADMIN = 'ROLE_ADMIN';

/** The server's rule for role names. */
export const ROLE_NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

/** The resource of a whole namespace, as the console grants it. */
export function namespaceResource(namespaceId: string): string {
  return `${namespaceId}:*:*`;
}

/** What a resource pattern covers, in the words the tables use. */
export type Scope =
  | { kind: 'namespace'; namespaceId: string }
  | { kind: 'everything' }
  | { kind: 'pattern' };

export function scopeOf(resource: string): Scope {
  if (resource === '*:*:*' || resource === '*') return { kind: 'everything' };
  const m = /^([^:*]*):\*:\*$/.exec(resource);
  if (m) return { kind: 'namespace', namespaceId: m[1] === '' ? 'public' : m[1] };
  return { kind: 'pattern' };
}

/** The tag colour and label of each action. */
export const ACTIONS: Record<Action, [color: string, label: MessageKey]> = {
  r: ['blue', 'perm.action.r'],
  rw: ['green', 'perm.action.rw'],
  w: ['orange', 'perm.action.w'],
};
