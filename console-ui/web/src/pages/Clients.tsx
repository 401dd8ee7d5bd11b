// The naming clients (admins): the gRPC connections and address clients (v1 beats, v1
// UDP subscriptions) a node knows, with what each publishes and subscribes to — of the
// node the console talks to, or of every member at once (each asked at its own HTTP
// address, as the cluster page does, and merged with a Node column).
//
// One `GET /api/v1/clients` per node gives the whole page: the detail drawer reads the
// row it was opened from. The search box filters on the server: an address prefix when
// it looks like one, else a part of the application's name.
import { Alert, Card, Descriptions, Drawer, Input, Segmented, Table, Tag, Tooltip, Typography } from 'antd';
import { useEffect, useState } from 'react';
import { call, type ClientPublished, type ClientsAnswer, type ClientSubscribed, type NamingClient } from '../api';
import { apiBase, knownMembers, memberBase, useEndpoint } from '../endpoint';
import { useT } from '../i18n';
import { useDebounced, useInterval, useNow, usePaging, useResource } from '../hooks';
import { AutoRefreshControls, EmptyState, LoadError, PageTitle, RefreshError } from '../components/bits';
import { ago, dateTime, num } from '../format';
import { serviceHref } from '../router';

/** How often the page asks again, ms. */
const POLL_MS = 5000;
/** How long another member may take to answer. */
const MEMBER_MS = 3000;

type Scope = 'node' | 'all';

/** A client and the node that listed it. */
type Row = NamingClient & { node: number; key: string };

/** What the page shows: the rows, the node that answered, the members that did not. */
interface Listing {
  rows: Row[];
  /** the node the console talks to (its answer's `node`) */
  node: number | null;
  unreachable: { id: number; message: string }[];
  /** members asked (1 when only the current node could be) */
  asked: number;
}

/** The search as the server's filter: an address prefix, or a part of an app name. */
function filterOf(q: string): Record<string, string | undefined> {
  if (q === '') return {};
  return /^[0-9a-fA-F.:[\]]+$/.test(q) && /[.:]|^\d+$/.test(q) ? { ip: q } : { app: q };
}

function rowsOf(a: ClientsAnswer): Row[] {
  return a.clients.map((c) => ({ ...c, node: a.node, key: `${a.node}/${c.clientId}` }));
}

async function loadClients(scope: Scope, q: string): Promise<Listing> {
  const filter = filterOf(q);
  const here = await call<ClientsAnswer>('GET', '/api/v1/clients', filter);
  const listing: Listing = { rows: rowsOf(here), node: here.node, unreachable: [], asked: 1 };
  if (scope === 'node') return listing;
  const current = apiBase();
  const others = knownMembers().filter((m) => m.id !== here.node && memberBase(m) !== current);
  const answers = await Promise.allSettled(
    others.map((m) =>
      call<ClientsAnswer>('GET', '/api/v1/clients', filter, {
        base: memberBase(m),
        signal: AbortSignal.timeout(MEMBER_MS),
      }),
    ),
  );
  answers.forEach((a, i) => {
    if (a.status === 'fulfilled') listing.rows.push(...rowsOf(a.value));
    else listing.unreachable.push({ id: others[i].id, message: a.reason instanceof Error ? a.reason.message : String(a.reason) });
  });
  listing.asked += others.length;
  listing.rows.sort((x, y) => x.node - y.node || x.clientId.localeCompare(y.clientId));
  return listing;
}

/** host:port of a client, or — when it has none. */
function address(c: NamingClient): string {
  if (!c.clientIp) return '—';
  return c.clientIp.includes(':') ? `[${c.clientIp}]:${c.clientPort ?? ''}` : `${c.clientIp}:${c.clientPort ?? ''}`;
}

/** A link to a service's page. */
function ServiceLink({ s }: { s: ClientSubscribed }) {
  return (
    <a href={'#' + serviceHref(s.namespaceId, s.groupName, s.serviceName)} data-testid="client-service-link" data-service={s.serviceName}>
      <span className="mono">{s.serviceName}</span>
    </a>
  );
}

/** The client's type: gRPC connection or address client. */
function TypeTag({ c }: { c: NamingClient }) {
  const t = useT();
  return c.clientType === 'connection' ? (
    <Tag color="blue" bordered={false} data-type="connection">
      {t('clients.type.connection')}
    </Tag>
  ) : (
    <Tag color="purple" bordered={false} data-type="ipPort">
      {t('clients.type.ipPort')}
    </Tag>
  );
}

export function ClientsPage() {
  const t = useT();
  const now = useNow(5000);
  const { current } = useEndpoint();
  const [scope, setScope] = useState<Scope>('node');
  const [search, setSearch] = useState('');
  const [auto, setAuto] = useState(true);
  const [updated, setUpdated] = useState<Date | null>(null);
  const [opened, setOpened] = useState<string | null>(null);
  const q = useDebounced(search.trim(), 300);
  const { setPage, pagination } = usePaging(20);

  const res = useResource(async () => {
    const r = await loadClients(scope, q);
    setUpdated(new Date());
    return r;
  }, [scope, q, current.base]);
  useEffect(() => setPage(1), [scope, q]);
  useInterval(
    async () => {
      if (document.visibilityState === 'visible') await res.reload({ silent: true });
    },
    POLL_MS,
    auto,
  );

  const listing = res.data;
  const rows = listing?.rows;
  // the drawer follows its client through refreshes; it closes if the client goes
  const detail = rows?.find((r) => r.key === opened) ?? null;
  const secondary = (s: string) => <Typography.Text type="secondary">{s}</Typography.Text>;

  const columns = [
    ...(scope === 'all'
      ? [
          {
            title: t('clients.node'),
            dataIndex: 'node',
            key: 'node',
            width: 80,
            render: (n: number) => <span data-testid="client-node">{n}</span>,
          },
        ]
      : []),
    {
      title: t('clients.id'),
      dataIndex: 'clientId',
      key: 'id',
      render: (id: string, r: Row) => (
        <span className="cell-clip">
          <a
            className="mono"
            title={id}
            data-testid="client-open"
            onClick={(e) => {
              e.preventDefault();
              setOpened(r.key);
            }}
            href="#"
          >
            {id}
          </a>
          {!r.here && r.clientType === 'connection' && (
            <Tooltip title={t('clients.copyHint')}>
              <Tag bordered={false} style={{ marginInlineStart: 6 }} data-testid="client-copy">
                {t('clients.copy')}
              </Tag>
            </Tooltip>
          )}
        </span>
      ),
    },
    { title: t('clients.type'), key: 'type', width: 120, render: (_: unknown, r: Row) => <TypeTag c={r} /> },
    {
      title: t('clients.address'),
      key: 'address',
      width: 170,
      render: (_: unknown, r: Row) => <span className="mono" data-testid="client-address">{address(r)}</span>,
    },
    {
      title: t('clients.app'),
      dataIndex: 'appName',
      key: 'app',
      width: 130,
      render: (a?: string | null) => (a ? <span data-testid="client-app">{a}</span> : secondary('—')),
    },
    {
      title: t('clients.version'),
      dataIndex: 'version',
      key: 'version',
      width: 180,
      render: (v?: string | null) => (v ? <span className="mono cell-clip audit-small" title={v}>{v}</span> : secondary('—')),
    },
    {
      title: t('clients.lastActive'),
      dataIndex: 'lastUpdatedTime',
      key: 'last',
      width: 110,
      render: (ms: number) =>
        ms > 0 ? (
          <Tooltip title={dateTime(new Date(ms))}>
            <span className="nowrap">{ago(ms, now, t)}</span>
          </Tooltip>
        ) : (
          secondary('—')
        ),
    },
    {
      title: t('clients.published'),
      key: 'published',
      width: 90,
      align: 'right' as const,
      render: (_: unknown, r: Row) => <span data-testid="client-published-count">{num(r.published.length)}</span>,
    },
    {
      title: t('clients.subscribed'),
      key: 'subscribed',
      width: 90,
      align: 'right' as const,
      render: (_: unknown, r: Row) => <span data-testid="client-subscribed-count">{num(r.subscribed.length)}</span>,
    },
  ];

  const members = knownMembers().length;
  const subtitle =
    scope === 'node'
      ? listing?.node != null
        ? t('clients.subtitleNode', { node: listing.node })
        : t('clients.subtitle')
      : t('clients.subtitleAll', { count: listing?.asked ?? members });

  return (
    <div className="page">
      <PageTitle
        title={t('clients.title')}
        subtitle={subtitle}
        extra={
          <AutoRefreshControls
            id="clients"
            label={t('clients.autoRefresh')}
            auto={auto}
            onAuto={setAuto}
            updated={updated}
            onRefresh={() => res.reload({ silent: true })}
          />
        }
      />
      <Card className="table-card">
        <div className="filters">
          <Input.Search
            allowClear
            value={search}
            onChange={(e) => setSearch(e.target.value)}
            placeholder={t('clients.search')}
            style={{ width: 300 }}
            data-testid="clients-search"
          />
          <Segmented<Scope>
            value={scope}
            onChange={setScope}
            data-testid="clients-scope"
            options={[
              { value: 'node', label: <span data-testid="clients-scope-node">{t('clients.scope.node')}</span> },
              {
                value: 'all',
                label: (
                  <Tooltip title={members === 0 ? t('clients.noMembers') : undefined}>
                    <span data-testid="clients-scope-all">{t('clients.scope.all')}</span>
                  </Tooltip>
                ),
                disabled: members === 0,
              },
            ]}
          />
        </div>
        {listing && listing.unreachable.length > 0 && (
          <Alert
            type="warning"
            showIcon
            style={{ marginBottom: 12 }}
            data-testid="clients-unreachable"
            message={t('clients.unreachable', { nodes: listing.unreachable.map((u) => u.id).join(', ') })}
            description={listing.unreachable.map((u) => `${u.id}: ${u.message}`).join('; ')}
          />
        )}
        <RefreshError error={res.data !== undefined ? res.error : undefined} />
        {res.data === undefined && res.error !== undefined ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<Row>
            data-testid="clients-table"
            size="middle"
            tableLayout="fixed"
            rowKey="key"
            columns={columns}
            dataSource={rows}
            loading={res.loading}
            onRow={(r) => ({ 'data-testid': 'client-row', 'data-client': r.clientId, 'data-node': r.node }) as React.HTMLAttributes<HTMLElement>}
            locale={{ emptyText: res.loading ? ' ' : <EmptyState text={q ? t('clients.noMatch') : t('clients.empty')} /> }}
            pagination={pagination(rows?.length ?? 0, { pageSizeOptions: [20, 50, 100] })}
          />
        )}
      </Card>
      <Drawer
        open={detail !== null}
        onClose={() => setOpened(null)}
        width={640}
        title={t('clients.detail')}
        destroyOnClose
      >
        {detail && <ClientDetail c={detail} now={now} showNode={scope === 'all'} />}
      </Drawer>
    </div>
  );
}

/** One client: what it is, the instances it publishes, the services it subscribes to. */
function ClientDetail({ c, now, showNode }: { c: Row; now: number; showNode: boolean }) {
  const t = useT();
  const dash = <Typography.Text type="secondary">—</Typography.Text>;
  const publishedColumns = [
    { title: t('clients.service'), key: 'service', render: (_: unknown, p: ClientPublished) => <ServiceLink s={p} /> },
    { title: t('clients.group'), dataIndex: 'groupName', key: 'group', width: 130 },
    { title: t('clients.namespace'), dataIndex: 'namespaceId', key: 'ns', width: 110 },
    {
      title: t('clients.instance'),
      key: 'instance',
      width: 150,
      render: (_: unknown, p: ClientPublished) => <span className="mono">{p.ip.includes(':') ? `[${p.ip}]:${p.port}` : `${p.ip}:${p.port}`}</span>,
    },
    { title: t('clients.cluster'), dataIndex: 'clusterName', key: 'cluster', width: 100 },
  ];
  const subscribedColumns = [
    { title: t('clients.service'), key: 'service', render: (_: unknown, s: ClientSubscribed) => <ServiceLink s={s} /> },
    { title: t('clients.group'), dataIndex: 'groupName', key: 'group', width: 150 },
    { title: t('clients.namespace'), dataIndex: 'namespaceId', key: 'ns', width: 130 },
  ];
  const key = (s: ClientSubscribed & { ip?: string; port?: number }) =>
    `${s.namespaceId}/${s.groupName}/${s.serviceName}/${s.ip ?? ''}:${s.port ?? ''}`;
  return (
    <div data-testid="client-detail" data-client={c.clientId}>
      <Descriptions column={1} size="small" bordered>
        <Descriptions.Item label={t('clients.id')}>
          <Typography.Text className="mono" copyable data-testid="client-detail-id">
            {c.clientId}
          </Typography.Text>
        </Descriptions.Item>
        {showNode && <Descriptions.Item label={t('clients.node')}>{c.node}</Descriptions.Item>}
        <Descriptions.Item label={t('clients.type')}>
          <TypeTag c={c} />
          {c.connectType && <Tag bordered={false}>{c.connectType}</Tag>}
          {!c.here && c.clientType === 'connection' && <Tag bordered={false}>{t('clients.copy')}</Tag>}
        </Descriptions.Item>
        <Descriptions.Item label={t('clients.address')}>
          <span className="mono">{address(c)}</span>
        </Descriptions.Item>
        <Descriptions.Item label={t('clients.app')}>{c.appName || dash}</Descriptions.Item>
        <Descriptions.Item label={t('clients.version')}>{c.version ? <span className="mono">{c.version}</span> : dash}</Descriptions.Item>
        <Descriptions.Item label={t('clients.lastActive')}>
          {c.lastUpdatedTime > 0 ? `${dateTime(new Date(c.lastUpdatedTime))} (${ago(c.lastUpdatedTime, now, t)})` : dash}
        </Descriptions.Item>
      </Descriptions>
      <Typography.Title level={5} style={{ marginTop: 20 }}>
        {t('clients.publishedTitle', { count: c.published.length })}
      </Typography.Title>
      <Table<ClientPublished>
        data-testid="client-published"
        size="small"
        rowKey={key}
        columns={publishedColumns}
        dataSource={c.published}
        pagination={false}
        locale={{ emptyText: <EmptyState text={t('clients.noPublished')} /> }}
      />
      <Typography.Title level={5} style={{ marginTop: 20 }}>
        {t('clients.subscribedTitle', { count: c.subscribed.length })}
      </Typography.Title>
      <Table<ClientSubscribed>
        data-testid="client-subscribed"
        size="small"
        rowKey={key}
        columns={subscribedColumns}
        dataSource={c.subscribed}
        pagination={false}
        locale={{
          emptyText: <EmptyState text={!c.here && c.clientType === 'connection' ? t('clients.subscribedElsewhere') : t('clients.noSubscribed')} />,
        }}
      />
    </div>
  );
}
