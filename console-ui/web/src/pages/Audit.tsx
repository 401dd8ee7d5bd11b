// The audit log (admins): who did what, from where, through which face, with what
// answer, newest first — the log of the node that answers (each node keeps its own).
//
// The page polls (every 5 s while it is shown and auto-refresh is on) rather than
// following events: logins and refused requests, which it exists to show, change
// nothing that an event would announce.
import { AutoComplete, Alert, Card, DatePicker, Input, Select, Table, Tag, Tooltip, Typography } from 'antd';
import { useEffect, useState } from 'react';
import { call, type AuditAnswer, type AuditEntry } from '../api';
import { useT, type MessageKey } from '../i18n';
import { useDebounced, useInterval, usePaging, useResource } from '../hooks';
import { AutoRefreshControls, EmptyState, LoadError, PageTitle, RefreshError } from '../components/bits';
import { UserFilter } from '../components/Pickers';
import { dateTime } from '../format';
import { fetchNamespaces } from './Namespaces';

/** How often the page asks again, ms. */
const POLL_MS = 5000;

/** The time filter: a span up to now, or a range picked by hand. */
type Period = 'all' | '15m' | '1h' | '24h' | '7d' | 'custom';
const SPANS: Record<Exclude<Period, 'all' | 'custom'>, number> = {
  '15m': 15 * 60_000,
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 7 * 86_400_000,
};
const PERIODS: [Period, MessageKey][] = [
  ['all', 'audit.period.all'],
  ['15m', 'audit.period.15m'],
  ['1h', 'audit.period.1h'],
  ['24h', 'audit.period.24h'],
  ['7d', 'audit.period.7d'],
  ['custom', 'audit.period.custom'],
];

const LIMITS = [100, 500, 1000];

/** A status, coloured: success green, refusals of access red, other 4xx orange, 5xx magenta. */
export function StatusTag({ status }: { status: number }) {
  const color =
    status >= 200 && status < 300
      ? 'green'
      : status === 401 || status === 403
        ? 'red'
        : status >= 400 && status < 500
          ? 'orange'
          : status >= 500
            ? 'magenta'
            : 'default';
  return (
    <Tag color={color} data-testid="audit-status" data-status={status}>
      {status}
    </Tag>
  );
}

type Row = AuditEntry & { key: number };

/** Something with a time in milliseconds (antd's date values). */
interface Instant {
  valueOf(): number;
}

export function AuditPage() {
  const t = useT();
  const [user, setUser] = useState('');
  const [namespace, setNamespace] = useState('');
  const [period, setPeriod] = useState<Period>('all');
  const [range, setRange] = useState<[number, number] | null>(null);
  const [limit, setLimit] = useState(100);
  const [auto, setAuto] = useState(true);
  const [updated, setUpdated] = useState<Date | null>(null);
  const qUser = useDebounced(user.trim(), 300);
  const qNamespace = useDebounced(namespace.trim(), 300);
  const { setPage, pagination } = usePaging(20);

  const res = useResource(async () => {
    // a span is up to now: computed again on every refresh
    let since: number | undefined;
    let until: number | undefined;
    if (period === 'custom' && range) [since, until] = range;
    else if (period !== 'all' && period !== 'custom') since = Date.now() - SPANS[period];
    const r = await call<AuditAnswer>('GET', '/api/v1/audit', {
      user: qUser || undefined,
      namespaceId: qNamespace || undefined,
      since,
      until,
      limit,
    });
    setUpdated(new Date());
    // entries have no id: their place in this answer is their row key
    return { truncated: r.truncated, entries: r.entries.map((e, key) => ({ ...e, key })) };
  }, [qUser, qNamespace, period, range, limit]);
  useEffect(() => setPage(1), [qUser, qNamespace, period, range, limit]);
  useInterval(
    async () => {
      if (document.visibilityState === 'visible') await res.reload({ silent: true });
    },
    POLL_MS,
    auto,
  );
  const namespaces = useResource(fetchNamespaces, []);

  const secondary = (s: string) => <Typography.Text type="secondary">{s}</Typography.Text>;
  const columns = [
    {
      title: t('audit.time'),
      dataIndex: 'time',
      key: 'time',
      width: 160,
      render: (ms: number) => <span className="nowrap">{dateTime(new Date(ms))}</span>,
    },
    {
      title: t('audit.user'),
      dataIndex: 'user',
      key: 'user',
      width: 90,
      render: (u: string) =>
        u === 'anonymous' ? (
          secondary(t('audit.anonymous'))
        ) : (
          <Typography.Text strong ellipsis={{ tooltip: u }}>
            {u}
          </Typography.Text>
        ),
    },
    {
      title: t('audit.address'),
      dataIndex: 'address',
      key: 'address',
      width: 100,
      render: (a?: string | null) => (a ? <span className="mono cell-clip audit-small" title={a}>{a}</span> : secondary('—')),
    },
    {
      title: t('audit.face'),
      dataIndex: 'face',
      key: 'face',
      width: 80,
      render: (f: string) => <Tag bordered={false}>{f}</Tag>,
    },
    {
      title: t('audit.action'),
      dataIndex: 'action',
      key: 'action',
      width: 260,
      render: (a: string) => (
        <span className="mono cell-clip audit-small" title={a} data-testid="audit-action">
          {a}
        </span>
      ),
    },
    {
      title: t('audit.namespace'),
      dataIndex: 'namespaceId',
      key: 'namespace',
      width: 110,
      render: (ns?: string | null) => (ns ? <span className="mono cell-clip audit-small" title={ns}>{ns}</span> : secondary('—')),
    },
    {
      title: t('audit.resource'),
      dataIndex: 'resource',
      key: 'resource',
      render: (r?: string | null) =>
        r ? (
          <Typography.Text className="mono audit-resource" ellipsis={{ tooltip: r }} data-testid="audit-resource">
            {r}
          </Typography.Text>
        ) : (
          secondary('—')
        ),
    },
    {
      title: t('audit.status'),
      dataIndex: 'status',
      key: 'status',
      width: 70,
      render: (s: number) => <StatusTag status={s} />,
    },
  ];

  const entries = res.data?.entries;
  return (
    <div className="page">
      <PageTitle
        title={t('audit.title')}
        subtitle={t('audit.subtitle')}
        extra={
          <AutoRefreshControls
            id="audit"
            label={t('audit.autoRefresh')}
            auto={auto}
            onAuto={setAuto}
            updated={updated}
            onRefresh={() => res.reload({ silent: true })}
          />
        }
      />
      <Card className="table-card">
        <div className="filters">
          <UserFilter value={user} onChange={setUser} placeholder={t('audit.filterUser')} testid="audit-filter-user" />
          <AutoComplete
            value={namespace}
            onChange={setNamespace}
            allowClear
            style={{ width: 220 }}
            options={(namespaces.data ?? []).map((n) => ({ value: n.namespace }))}
          >
            <Input autoComplete="off" placeholder={t('audit.filterNamespace')} data-testid="audit-filter-namespace" />
          </AutoComplete>
          <Select<Period>
            value={period}
            onChange={(p) => {
              setPeriod(p);
              if (p !== 'custom') setRange(null);
            }}
            style={{ width: 170 }}
            aria-label={t('audit.time')}
            data-testid="audit-filter-period"
            options={PERIODS.map(([value, label]) => ({ value, label: t(label) }))}
          />
          {period === 'custom' && (
            <DatePicker.RangePicker
              showTime
              data-testid="audit-filter-range"
              onChange={(values: [Instant | null, Instant | null] | null) => {
                const [a, b] = values ?? [null, null];
                setRange(a && b ? [a.valueOf(), b.valueOf()] : null);
              }}
            />
          )}
          <Tooltip title={t('audit.limitHint')}>
            <Select<number>
              value={limit}
              onChange={setLimit}
              style={{ width: 130 }}
              aria-label={t('audit.limitHint')}
              data-testid="audit-filter-limit"
              options={LIMITS.map((n) => ({ value: n, label: t('audit.limit', { count: n }) }))}
            />
          </Tooltip>
        </div>
        {res.data?.truncated && (
          <Alert
            type="info"
            showIcon
            style={{ marginBottom: 12 }}
            message={t('audit.truncated', { count: res.data.entries.length })}
            data-testid="audit-truncated"
          />
        )}
        <RefreshError error={res.data !== undefined ? res.error : undefined} />
        {res.data === undefined && res.error !== undefined ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<Row>
            data-testid="audit-table"
            size="middle"
            tableLayout="fixed"
            rowKey="key"
            columns={columns}
            dataSource={entries}
            loading={res.loading}
            rowClassName={(e) => (e.status >= 400 ? 'row-refused' : '')}
            locale={{ emptyText: res.loading ? ' ' : <EmptyState text={t('audit.empty')} /> }}
            pagination={pagination(entries?.length ?? 0, { pageSizeOptions: [20, 50, 100] })}
          />
        )}
      </Card>
    </div>
  );
}
