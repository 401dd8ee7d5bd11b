// Thin fetch wrapper for roster's HTTP API.
//
// Every call carries the session token as `Authorization: Bearer`. Parameters go
// in the query (GET, DELETE) or as a form body; `json` sends a JSON body instead, `form`
// a multipart one (a file). `fetchFile` answers the body as a file (an export).
// Errors are thrown as ApiError whose message is the server's plain-text body, verbatim.
// A 401, or a 403 that says the token is invalid or expired, ends the session.
// Paths go to the node the console talks to (`endpoint.ts`): when a call gets no
// answer, the console moves to another member; a GET is then sent again there, any
// other call fails with `switched` set (it may have been done before the node died,
// so the person decides whether to repeat it).

import { apiBase, failover } from './endpoint';

export class ApiError extends Error {
  readonly status: number;
  /** true when the request never got an answer (network down, server gone) */
  readonly network: boolean;
  /** true when the answer meant: the session is over */
  readonly sessionExpired: boolean;
  /** true when the node gave no answer and the console moved to another member */
  readonly switched: boolean;
  constructor(
    status: number,
    message: string,
    opts: { network?: boolean; sessionExpired?: boolean; switched?: boolean } = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.network = opts.network ?? false;
    this.sessionExpired = opts.sessionExpired ?? false;
    this.switched = opts.switched ?? false;
  }
}

export type Params = Record<string, string | number | boolean | null | undefined>;

interface AuthHooks {
  token(): string | null;
  /** the server rejected `token`: end the session if it is still the current one */
  expired(token: string): void;
}

let hooks: AuthHooks = { token: () => null, expired: () => {} };

export function configureApi(h: AuthHooks): void {
  hooks = h;
}

function encode(params: Params | undefined): URLSearchParams {
  const out = new URLSearchParams();
  if (!params) return out;
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    out.set(k, String(v));
  }
  return out;
}

/** Does this 403 body say the token itself is bad (rather than "not allowed")? */
export function isTokenRejection(status: number, body: string): boolean {
  if (status === 401) return true;
  if (status !== 403) return false;
  return /token/i.test(body) && /(invalid|expired)/i.test(body);
}

export interface CallOptions {
  /** do not attach the token nor treat 401/403 as an expired session (login) */
  anonymous?: boolean;
  signal?: AbortSignal;
  /** a JSON request body (roster's own API); `params` then only go in the query */
  json?: unknown;
  /** a multipart request body (a file upload); `params` then only go in the query */
  form?: FormData;
  /** send to this member's base (see `endpoint.ts`) and never move elsewhere */
  base?: string;
}

/** Sends a request; answers the response when it succeeded, else throws its ApiError. */
async function send(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  params: Params | undefined,
  opts: CallOptions,
  accept: string,
): Promise<Response> {
  const qs = encode(params);
  let url = path;
  let body: URLSearchParams | FormData | string | undefined;
  const headers: Record<string, string> = { Accept: accept };
  if (method === 'GET' || method === 'DELETE' || opts.json !== undefined || opts.form !== undefined) {
    const s = qs.toString();
    if (s) url += (url.includes('?') ? '&' : '?') + s;
  } else {
    body = qs;
  }
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers['Content-Type'] = 'application/json';
  }
  // the browser writes the multipart Content-Type, with its boundary
  if (opts.form !== undefined) body = opts.form;
  const token = opts.anonymous ? null : hooks.token();
  if (token) headers.Authorization = `Bearer ${token}`;

  let res: Response;
  const base = opts.base ?? apiBase();
  try {
    res = await fetch(base + url, { method, headers, body, cache: 'no-store', signal: opts.signal });
  } catch (e) {
    if (e instanceof DOMException && e.name === 'AbortError') throw e;
    const message = e instanceof Error ? e.message : String(e);
    if (opts.base !== undefined || !(await failover(base, token))) {
      throw new ApiError(0, message, { network: true });
    }
    if (method !== 'GET') throw new ApiError(0, message, { network: true, switched: true });
    try {
      res = await fetch(apiBase() + url, { method, headers, body, cache: 'no-store', signal: opts.signal });
    } catch (again) {
      if (again instanceof DOMException && again.name === 'AbortError') throw again;
      throw new ApiError(0, again instanceof Error ? again.message : String(again), { network: true });
    }
  }
  if (res.ok) return res;
  const text = await res.text();
  const message = text.trim() || `HTTP ${res.status} ${res.statusText}`.trim();
  if (!opts.anonymous && token && isTokenRejection(res.status, text)) {
    hooks.expired(token);
    throw new ApiError(res.status, message, { sessionExpired: true });
  }
  throw new ApiError(res.status, message);
}

export async function call<T = unknown>(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  params?: Params,
  opts: CallOptions = {},
): Promise<T> {
  const res = await send(method, path, params, opts, 'application/json, text/plain;q=0.9');
  const text = await res.text();
  if (!text) return undefined as T;
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text as T;
  }
  // Nacos-style envelopes ({code, message, data}) that report a failure with 200.
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
    const env = parsed as { code?: unknown; message?: unknown; data?: unknown };
    if (typeof env.code === 'number' && env.code >= 400) {
      const msg = typeof env.message === 'string' && env.message ? env.message : String(env.data ?? `code ${env.code}`);
      throw new ApiError(env.code, msg);
    }
  }
  return parsed as T;
}

/** A file the server answers: its bytes, and the name its `Content-Disposition` gives. */
export interface FetchedFile {
  blob: Blob;
  filename: string | null;
}

/** GETs `path` as a file (an export), with the session's token as every call has. */
export async function fetchFile(path: string, params?: Params): Promise<FetchedFile> {
  const res = await send('GET', path, params, {}, '*/*');
  const disposition = res.headers.get('Content-Disposition') ?? '';
  const name = /filename="?([^";]+)"?/i.exec(disposition)?.[1]?.trim();
  return { blob: await res.blob(), filename: name || null };
}

// ---------------------------------------------------------------- shapes

export interface LoginAnswer {
  accessToken: string;
  tokenTtl: number;
  globalAdmin: boolean;
  username: string;
}

export interface Namespace {
  namespace: string;
  namespaceShowName: string;
  namespaceDesc?: string;
  serviceCount?: number;
  instanceCount?: number;
  type: number;
}

export interface ServiceRow {
  name: string;
  groupName: string;
  clusterCount: number;
  ipCount: number;
  healthyInstanceCount: number;
  protectThreshold: number;
  triggerFlag: string | boolean;
}

export interface Selector {
  type: string;
  expression?: string;
}

export interface HealthChecker {
  type: string;
  path?: string;
  headers?: string;
  expectedResponseCode?: number;
  [k: string]: unknown;
}

export interface ClusterInfo {
  name: string;
  healthChecker?: HealthChecker;
  metadata?: Record<string, string>;
  defaultCheckPort?: number;
  defaultPort?: number;
  useIPPort4Check?: boolean;
}

export interface ServiceDetail {
  service: {
    name: string;
    groupName: string;
    protectThreshold: number;
    selector?: Selector;
    metadata?: Record<string, string>;
  };
  clusters: ClusterInfo[];
}

export interface Instance {
  ip: string;
  port: number;
  weight: number;
  healthy: boolean;
  enabled: boolean;
  ephemeral: boolean;
  clusterName: string;
  metadata?: Record<string, string>;
  instanceId?: string;
  /** The face that registered it (roster's catalog view only). */
  registeredBy?: RegisteredBy;
  /** The sync task that imported it, when `registeredBy` is `sync`. */
  registeredByTask?: string;
}

/** Which face registered an instance: Consul, Eureka, a sync task, a Nacos gRPC client,
 * or HTTP (Nacos v1/v2/v3 HTTP and roster's API, which cannot be told apart). */
export type RegisteredBy = 'consul' | 'eureka' | 'sync' | 'grpc' | 'http';

export interface Subscriber {
  addrStr: string;
  agent?: string;
  app?: string;
  ip?: string;
  port?: number;
  namespaceId?: string;
  serviceName?: string;
  cluster?: string;
  protocol?: string;
}

export interface ClusterMember {
  id: number;
  peer?: string;
  http?: string;
  role?: string;
  voter?: boolean;
  live?: boolean;
  version?: string;
  matchIndex?: number | null;
  lag?: number | null;
  grpcClients?: number | null;
  [k: string]: unknown;
}

export interface ClusterStatus {
  nodeId: number;
  state?: string;
  term?: number;
  leader?: number | null;
  lastLogIndex?: number;
  appliedIndex?: number;
  commitIndex?: number;
  snapshotIndex?: number;
  ready?: boolean;
  members: ClusterMember[];
  distroOwned?: Record<string, number>;
  evictionGuardEngaged?: string[];
}

export interface UserRow {
  username: string;
  admin?: boolean;
}

export interface UsersPage {
  pageItems: UserRow[];
  totalCount: number;
  pageNumber?: number;
  pagesAvailable?: number;
}

/** What a sync task is doing (`paused` by an operator; `holding`: deletions held back). */
export type SyncState = 'pending' | 'starting' | 'running' | 'holding' | 'error' | 'paused';

/** A dry run's findings: what the task would change, and some of the instances. */
export interface SyncDryRun {
  wouldAdd: number;
  wouldUpdate: number;
  wouldRemove: number;
  /** `namespace/group/service ip:port` */
  sample: string[];
}

export interface SyncStatus {
  state: SyncState;
  services: number;
  instances: number;
  heldDeletions: number;
  holdReasons?: string[];
  skipped: number;
  copiesIgnored?: number;
  lastError?: string | null;
  lastSyncMs?: number | null;
  lastChangeMs?: number | null;
  runner?: number | null;
  dryRun?: SyncDryRun | null;
}

/** A sync task of GET /api/v1/sync/tasks; `source` comes redacted. */
export interface SyncTask {
  name: string;
  source: string;
  namespace?: string | null;
  group?: string | null;
  services?: string | null;
  dryRun: boolean;
  paused: boolean;
  reconcileSecs?: number;
  createdMs?: number;
  status?: SyncStatus | null;
}

/** Whether `e` is the server saying "you may not" (403), rather than "who are you". */
export function isForbidden(e: unknown): boolean {
  return e instanceof ApiError && e.status === 403 && !e.sessionExpired;
}

/** One page of a Nacos auth list (`/nacos/v1/auth/roles`, `/permissions`). */
export interface AuthPage<T> {
  totalCount: number;
  pageNumber?: number;
  pagesAvailable?: number;
  pageItems: T[];
}

/** A role bound to a user; admins appear with `ROLE_ADMIN`. */
export interface RoleBinding {
  role: string;
  username: string;
}

/** What a permission lets its role do: read, write, or both. */
export type Action = 'r' | 'w' | 'rw';

/** A permission of a role: a resource pattern (`namespaceId:group:naming/service`) and an action. */
export interface Permission {
  role: string;
  resource: string;
  action: Action;
}

/** The faces a request can come through, as the audit log names them. */
export type Face = 'http-v1' | 'http-v2' | 'console' | 'api' | 'http' | 'grpc';

/** One line of a node's audit log. */
export interface AuditEntry {
  /** Unix milliseconds */
  time: number;
  user: string;
  address?: string | null;
  face: Face | string;
  /** `POST /nacos/v1/ns/instance`, or a gRPC request type and operation */
  action: string;
  namespaceId?: string | null;
  resource?: string | null;
  /** the HTTP status, or the gRPC answer's code (200 when it succeeded) */
  status: number;
}

export interface AuditAnswer {
  entries: AuditEntry[];
  /** more entries matched than `limit` */
  truncated: boolean;
}

/** A service a client publishes an instance of, as `GET /api/v1/clients` lists it. */
export interface ClientPublished {
  namespaceId: string;
  groupName: string;
  serviceName: string;
  ip: string;
  port: number;
  clusterName: string;
}

/** A service a client subscribes to. */
export interface ClientSubscribed {
  namespaceId: string;
  groupName: string;
  serviceName: string;
}

/** A naming client of a node, as `GET /api/v1/clients` lists it. */
export interface NamingClient {
  clientId: string;
  /** `connection` (gRPC) or `ipPort` (v1 beats, v1 UDP subscriptions) */
  clientType: 'connection' | 'ipPort';
  connectType?: string;
  clientIp?: string;
  clientPort?: number;
  appName?: string | null;
  version?: string | null;
  lastUpdatedTime: number;
  /** this node's own connection (or an address client it is responsible for), not a copy */
  here: boolean;
  published: ClientPublished[];
  subscribed: ClientSubscribed[];
}

/** `GET /api/v1/clients`: the clients of the node that answers. */
export interface ClientsAnswer {
  node: number;
  clients: NamingClient[];
}

/** An instant as the config API writes it: Unix milliseconds, or an ISO 8601 text. */
export type Instant = number | string;

/** A configuration item as `GET /nacos/v1/cs/configs?search=` lists it. */
export interface ConfigRow {
  id: number | string;
  dataId: string;
  group: string;
  /** empty for the public namespace */
  tenant?: string;
  appName?: string;
  type?: string;
  md5?: string;
  content?: string;
  modifyTime?: Instant;
  lastModifiedTime?: Instant;
}

/** A configuration item as `GET /nacos/v1/cs/configs?show=all` shows it. */
export interface ConfigDetail extends ConfigRow {
  content: string;
  md5: string;
  desc?: string;
  /** comma-separated */
  configTags?: string;
  createTime?: Instant;
  createUser?: string;
  modifyUser?: string;
}

/** What a version records: created (I), updated (U) or deleted (D). */
export type ConfigOp = 'I' | 'U' | 'D';

/** A version of a configuration item, from `GET /nacos/v1/cs/history`. */
export interface ConfigVersion {
  id: number | string;
  dataId: string;
  group: string;
  tenant?: string;
  appName?: string;
  type?: string;
  md5: string;
  /** in listings, possibly absent: the detail (`?nid=`) has it */
  content?: string;
  srcIp?: string;
  srcUser?: string;
  opType: ConfigOp | string;
  /** `gray` for a version of a gray release (Nacos 2.3+), else `formal` */
  publishType?: 'formal' | 'gray' | string;
  /** the gray release's name: `beta`, or `tag_<tag>`; empty for the formal content */
  grayName?: string;
  createdTime?: Instant;
  lastModifiedTime?: Instant;
}

/** One page of a config listing (items or versions). */
export interface ConfigPage<T> {
  totalCount: number;
  pageNumber?: number;
  pagesAvailable?: number;
  pageItems: T[];
}

/** A client listening to a configuration item, from `GET /nacos/v1/cs/configs/listener`. */
export interface ConfigListener {
  /** `ip:port` (gRPC) or the peer's IP (HTTP) */
  address: string;
  /** `http`: a long poll held now; `grpc`: a connection that listens */
  protocol: 'http' | 'grpc' | string;
  /** what the client says it is (gRPC client version, HTTP User-Agent) */
  client: string;
  /** the md5 of the content it holds (empty: none) */
  md5: string;
  /** it holds the current content */
  current: boolean;
}

/** What an import did (`data` of `POST /nacos/v1/cs/configs?import=true`). */
export interface ConfigImportResult {
  succCount: number;
  skipCount: number;
  /** the items left alone (policy SKIP) */
  skipData?: { dataId: string; group: string }[];
}

/** An item's beta, from `GET /nacos/v1/cs/configs?beta=true` (Nacos' `ConfigInfo4Beta`). */
export interface ConfigBeta {
  content: string;
  md5: string;
  /** the client IPs it is for, comma-separated */
  betaIps: string;
  type?: string;
  createUser?: string;
  lastModified?: Instant;
  modifyTime?: Instant;
}
