import { Badge, Card, Descriptions, Skeleton, Space, Table, Tag, Tooltip, Typography } from 'antd';
import { CrownOutlined, InfoCircleOutlined } from '@ant-design/icons';
import { useState } from 'react';
import { call, type ClusterMember, type ClusterStatus } from '../api';
import { apiBase, learnMembers, memberBase } from '../endpoint';
import { useT, type MessageKey } from '../i18n';
import { useInterval, useResource } from '../hooks';
import { AutoRefreshControls, LoadError, PageTitle, RefreshError } from '../components/bits';
import { num } from '../format';

const roleColor: Record<string, string> = {
  leader: 'gold',
  follower: 'blue',
  candidate: 'orange',
  learner: 'cyan',
};

/** A Raft role as a coloured tag, in the console's language (the raw word as a tooltip). */
function RoleTag({ role }: { role?: string | null }) {
  const t = useT();
  if (!role) return <>—</>;
  const r = role.toLowerCase();
  const known = r === 'leader' || r === 'follower' || r === 'candidate' || r === 'learner' || r === 'shutdown';
  return (
    <Tag color={roleColor[r] ?? 'default'} title={role} data-role={r}>
      {known ? t(`cluster.role.${r}` as MessageKey) : role}
    </Tag>
  );
}

/** How long a member may take to report its own view. */
const VIEW_MS = 2000;

/** A member's own view of the cluster, as it reports it; an Error when it did not answer. */
type OwnView = ClusterStatus | Error;

interface ClusterAnswer {
  status: ClusterStatus;
  /** by member id */
  views: Map<number, OwnView>;
}

/**
 * The answering node's view, and every other member's own view asked of that member
 * directly (its HTTP address, cross-origin): a follower's term and indexes are its own,
 * and a member that cannot be reached says so here even when the answering node still
 * counts it live.
 */
async function loadCluster(): Promise<ClusterAnswer> {
  const base = apiBase();
  const status = await call<ClusterStatus>('GET', '/api/v1/cluster');
  learnMembers(base, status.members);
  const views = new Map<number, OwnView>([[status.nodeId, status]]);
  const others = status.members.filter((m) => m.id !== status.nodeId && m.http);
  const answers = await Promise.allSettled(
    others.map((m) =>
      call<ClusterStatus>('GET', '/api/v1/cluster', undefined, {
        base: memberBase({ id: m.id, http: m.http as string }),
        signal: AbortSignal.timeout(VIEW_MS),
      }),
    ),
  );
  answers.forEach((a, i) => {
    views.set(others[i].id, a.status === 'fulfilled' ? a.value : a.reason instanceof Error ? a.reason : new Error(String(a.reason)));
  });
  return { status, views };
}

/** A member's term, commit and applied index as it reports them. */
function OwnViewCell({ view, id }: { view: OwnView | undefined; id: number }) {
  const t = useT();
  if (view === undefined) return <>—</>;
  if (view instanceof Error) {
    return (
      <Tooltip title={view.message}>
        <Tag color="red" data-testid={`member-view-${id}`} data-reachable="false" data-error={view.message}>
          {t('cluster.unreachable')}
        </Tag>
      </Tooltip>
    );
  }
  return (
    <span className="mono own-view" data-testid={`member-view-${id}`} data-reachable="true" data-term={view.term} data-applied={view.appliedIndex}>
      {t('cluster.ownView', { term: num(view.term), commit: num(view.commitIndex), applied: num(view.appliedIndex) })}
    </span>
  );
}

export function ClusterPage() {
  const t = useT();
  const [auto, setAuto] = useState(true);
  const [updated, setUpdated] = useState<Date | null>(null);
  const res = useResource(async () => {
    const r = await loadCluster();
    setUpdated(new Date());
    return r;
  }, []);
  useInterval(() => res.reload({ silent: true }), 2000, auto);

  const s = res.data?.status;
  const views = res.data?.views;
  const leaderId = s?.leader ?? null;

  const columns = [
    {
      title: t('cluster.id'),
      dataIndex: 'id',
      key: 'id',
      width: 110,
      render: (id: number) => (
        <Space size={6}>
          <Typography.Text strong>{id}</Typography.Text>
          {id === leaderId && <CrownOutlined style={{ color: '#d48806' }} />}
          {s && id === s.nodeId && (
            <Tag bordered={false} color="blue" style={{ marginInlineEnd: 0 }}>
              {t('cluster.you')}
            </Tag>
          )}
        </Space>
      ),
    },
    {
      title: t('cluster.addresses'),
      key: 'addresses',
      render: (_: unknown, m: ClusterMember) => (
        <span className="mono addresses">
          <span title={t('cluster.http')}>{m.http || '—'}</span>
          <Typography.Text type="secondary" title={t('cluster.peer')}>
            {t('cluster.peerShort', { peer: m.peer ?? '—' })}
          </Typography.Text>
        </span>
      ),
    },
    {
      title: t('cluster.role'),
      dataIndex: 'role',
      key: 'role',
      // the member's own word on its role when it answered, else the answering node's
      // (a member that does not vote says so beside its role)
      render: (r: string | undefined, m: ClusterMember) => {
        const own = views?.get(m.id);
        return (
          <Space size={4} wrap>
            <RoleTag role={own && !(own instanceof Error) ? own.state : r} />
            {m.voter === false && (
              <Tag bordered={false} data-testid={`member-nonvoter-${m.id}`}>
                {t('cluster.nonVoter')}
              </Tag>
            )}
          </Space>
        );
      },
    },
    {
      title: t('cluster.live'),
      dataIndex: 'live',
      key: 'live',
      render: (l: boolean | undefined, m: ClusterMember) => (
        <span data-testid={`member-live-${m.id}`}>
          <Badge status={l ? 'success' : 'error'} text={l ? t('cluster.up') : t('cluster.down')} />
        </span>
      ),
    },
    {
      title: (
        <Tooltip title={t('cluster.ownViewHint')}>
          <span>
            {t('cluster.ownViewTitle')} <InfoCircleOutlined />
          </span>
        </Tooltip>
      ),
      key: 'own',
      render: (_: unknown, m: ClusterMember) => <OwnViewCell view={views?.get(m.id)} id={m.id} />,
    },
    {
      title: (
        <Tooltip title={t('cluster.lagHint')}>
          <span>
            {t('cluster.match')} <InfoCircleOutlined />
          </span>
        </Tooltip>
      ),
      dataIndex: 'matchIndex',
      key: 'match',
      align: 'right' as const,
      width: 100,
      className: 'wrap-head',
      render: (v: number | null | undefined, m: ClusterMember) => (
        <div className="nowrap">
          <div>{num(v)}</div>
          {m.lag != null && (
            <Typography.Text type="secondary" className={m.lag > 0 ? 'num-warn' : undefined}>
              {t('cluster.lag')} {num(m.lag)}
            </Typography.Text>
          )}
        </div>
      ),
    },
    {
      title: (
        <Tooltip title={t('cluster.clientsHint')}>
          <span>
            {t('cluster.clients')} <InfoCircleOutlined />
          </span>
        </Tooltip>
      ),
      key: 'clients',
      align: 'right' as const,
      width: 90,
      className: 'wrap-head',
      render: (_: unknown, m: ClusterMember) => (
        <div className="nowrap">
          <div>
            <span data-testid={`member-grpc-${m.id}`}>{num(m.grpcClients)}</span> {t('cluster.grpcShort')}
          </div>
          <Typography.Text type="secondary">
            {num(s?.distroOwned?.[String(m.id)])} {t('cluster.ownedShort')}
          </Typography.Text>
        </div>
      ),
    },
    { title: t('cluster.version'), dataIndex: 'version', key: 'version', render: (v?: string) => v ?? '—' },
  ];

  const guard = s?.evictionGuardEngaged ?? [];

  return (
    <div className="page">
      <PageTitle
        title={t('cluster.title')}
        subtitle={t('cluster.subtitle')}
        extra={
          <AutoRefreshControls
            id="cluster"
            label={t('cluster.autoRefresh')}
            auto={auto}
            onAuto={setAuto}
            updated={updated}
            onRefresh={() => res.reload({ silent: true })}
          />
        }
      />
      {s === undefined && res.error !== undefined ? (
        <Card>
          <LoadError error={res.error} onRetry={() => res.reload()} />
        </Card>
      ) : s === undefined ? (
        <Card>
          <Skeleton active />
        </Card>
      ) : (
        <>
          <RefreshError error={res.error} />
          <Card title={t('cluster.thisNode')} className="summary-card">
            <Descriptions
              size="small"
              column={{ xs: 1, sm: 2, md: 4 }}
              items={[
                { key: 'node', label: t('cluster.id'), children: <Typography.Text strong>{s.nodeId}</Typography.Text> },
                {
                  key: 'state',
                  label: t('cluster.state'),
                  children: <RoleTag role={s.state} />,
                },
                { key: 'term', label: t('cluster.term'), children: num(s.term) },
                {
                  key: 'leader',
                  label: t('cluster.leader'),
                  children: leaderId === null ? <Tag color="red">{t('cluster.noLeader')}</Tag> : leaderId,
                },
                { key: 'last', label: t('cluster.lastLog'), children: num(s.lastLogIndex) },
                { key: 'commit', label: t('cluster.commit'), children: num(s.commitIndex) },
                { key: 'applied', label: t('cluster.applied'), children: num(s.appliedIndex) },
                { key: 'snap', label: t('cluster.snapshot'), children: num(s.snapshotIndex) },
                {
                  key: 'ready',
                  label: t('cluster.ready'),
                  children: <Badge status={s.ready ? 'success' : 'warning'} text={s.ready ? t('common.yes') : t('common.no')} />,
                },
                {
                  key: 'guard',
                  label: t('cluster.guard'),
                  span: { xs: 1, sm: 2, md: 3 },
                  children:
                    guard.length === 0 ? (
                      <Typography.Text type="secondary">{t('cluster.guardOff')}</Typography.Text>
                    ) : (
                      <Typography.Text type="warning">{t('cluster.guardOn', { list: guard.join(', ') })}</Typography.Text>
                    ),
                },
              ]}
            />
          </Card>
          <Card title={t('cluster.members')} className="table-card">
            <Table<ClusterMember>
              data-testid="cluster-table"
              rowKey="id"
              columns={columns}
              dataSource={[...s.members].sort((a, b) => a.id - b.id)}
              pagination={false}
              scroll={{ x: 'max-content' }}
              rowClassName={(m) => (m.live === false ? 'row-offline' : '')}
            />
          </Card>
        </>
      )}
    </div>
  );
}
