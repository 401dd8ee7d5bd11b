// The overview: the node's own figures of the last 15 minutes as live charts, from
// `GET /api/v1/overview` (the node samples itself every few seconds; no Prometheus
// needed). The first answer brings the whole window, each later poll only what is new
// (`since`). When the console moves to another member (endpoint.ts) the charts start
// again from that node's window: figures of two nodes are never drawn as one line.
//
// This page and uPlot are one lazily loaded chunk, so the login page stays small.
import { Badge, Card, Col, Row, Skeleton, Statistic, Tag, Typography } from 'antd';
import { useEffect, useMemo, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { call } from '../api';
import { useAuth } from '../auth';
import { useEndpoint } from '../endpoint';
import { useT, type MessageKey } from '../i18n';
import { useInterval, useResource } from '../hooks';
import { AutoRefreshControls, LoadError, PageTitle, RefreshError } from '../components/bits';

interface FaceFigures {
  rate: number;
  p99Ms: number | null;
}

interface Sample {
  t: number;
  instances: number;
  healthy: number;
  registrations: number;
  deregistrations: number;
  beats: number;
  faces: Record<string, FaceFigures>;
  pushes: number;
  pushFailures: number;
  raft: {
    state: string;
    term: number;
    leader: number | null;
    lastLogIndex: number;
    commit: number | null;
    applied: number;
    lag: Record<string, number>;
  };
  guardEngaged: string[];
  syncTasks: Record<string, number>;
}

interface OverviewAnswer {
  node: number;
  intervalMs: number;
  windowMs: number;
  samples: Sample[];
  /** Raft as it is at the answer (a sample is up to an interval old) */
  raft: Sample['raft'];
}

interface Window {
  /** the endpoint base it came from: a window is only ever continued from the same node */
  base: string;
  node: number;
  intervalMs: number;
  windowMs: number;
  samples: Sample[];
  /** Raft at the last answer: what the summary shows */
  raft: Sample['raft'];
}

const FACES = ['v1', 'v2', 'v3', 'grpc', 'api', 'eureka', 'consul'] as const;
const TASK_STATES = ['running', 'holding', 'starting', 'pending', 'paused', 'error'] as const;
const COLORS = ['#1668dc', '#52c41a', '#fa8c16', '#722ed1', '#eb2f96', '#13c2c2', '#f5222d'];

/** A line of a chart: its label and its value in a sample (null where there is none). */
interface Line {
  label: string;
  value: (s: Sample) => number | null;
  color?: string;
}

interface ChartSpec {
  key: string;
  title: MessageKey;
  hint: MessageKey;
  /** the page that explains the figures, when this user may open it */
  link?: string;
  lines: Line[];
  /** digits after the point in the legend */
  digits?: number;
  /** what to say when there is no line to draw */
  empty?: MessageKey;
}

/** Appends `fresh` to the window, dropping what fell out of it. */
function merged(win: Window, fresh: Sample[]): Sample[] {
  const last = win.samples.length > 0 ? win.samples[win.samples.length - 1].t : -Infinity;
  const all = win.samples.concat(fresh.filter((s) => s.t > last));
  const newest = all.length > 0 ? all[all.length - 1].t : 0;
  return all.filter((s) => s.t > newest - win.windowMs);
}

export function OverviewPage() {
  const t = useT();
  const { session } = useAuth();
  const isAdmin = !!session?.globalAdmin;
  const base = useEndpoint().current.base;
  const [auto, setAuto] = useState(true);
  const [updated, setUpdated] = useState<Date | null>(null);
  const latest = useRef<Window | null>(null);

  const res = useResource<Window>(async () => {
    const prev = latest.current?.base === base ? latest.current : null;
    const since = prev && prev.samples.length > 0 ? prev.samples[prev.samples.length - 1].t : undefined;
    const a = await call<OverviewAnswer>('GET', '/api/v1/overview', { since });
    let next: Window;
    if (prev && prev.node === a.node && since !== undefined) {
      next = { ...prev, samples: merged(prev, a.samples), raft: a.raft };
    } else {
      // the first answer, or another node's: its whole window
      next = { base, node: a.node, intervalMs: a.intervalMs, windowMs: a.windowMs, samples: a.samples, raft: a.raft };
    }
    latest.current = next;
    setUpdated(new Date());
    return next;
  }, [base]);
  useInterval(() => res.reload({ silent: true }), res.data?.intervalMs ?? 5000, auto);

  const win = res.data;
  const now = win && win.samples.length > 0 ? win.samples[win.samples.length - 1] : undefined;
  // raft as of the last answer, not the newest sample (at start-up, from before a leader)
  const raft = win?.raft ?? now?.raft;
  const members = useMemo(() => {
    const ids = new Set<string>();
    win?.samples.forEach((s) => Object.keys(s.raft.lag).forEach((id) => ids.add(id)));
    return [...ids].sort((a, b) => Number(a) - Number(b));
  }, [win]);

  const charts: ChartSpec[] = [
    {
      key: 'instances',
      title: 'overview.instances',
      hint: 'overview.instancesHint',
      link: '#/services',
      lines: [
        { label: t('overview.line.instances'), value: (s) => s.instances },
        { label: t('overview.line.healthy'), value: (s) => s.healthy, color: '#52c41a' },
      ],
    },
    {
      key: 'writes',
      title: 'overview.writes',
      hint: 'overview.writesHint',
      link: '#/services',
      digits: 2,
      lines: [
        { label: t('overview.line.registrations'), value: (s) => s.registrations },
        { label: t('overview.line.deregistrations'), value: (s) => s.deregistrations, color: '#f5222d' },
        { label: t('overview.line.beats'), value: (s) => s.beats, color: '#fa8c16' },
      ],
    },
    {
      key: 'requests',
      title: 'overview.requests',
      hint: 'overview.requestsHint',
      link: isAdmin ? '#/audit' : undefined,
      digits: 2,
      lines: FACES.map((f) => ({ label: t(`overview.face.${f}` as MessageKey), value: (s: Sample) => s.faces[f]?.rate ?? 0 })),
    },
    {
      key: 'latency',
      title: 'overview.latency',
      hint: 'overview.latencyHint',
      link: isAdmin ? '#/audit' : undefined,
      digits: 2,
      lines: FACES.map((f) => ({ label: t(`overview.face.${f}` as MessageKey), value: (s: Sample) => s.faces[f]?.p99Ms ?? null })),
    },
    {
      key: 'pushes',
      title: 'overview.pushes',
      hint: 'overview.pushesHint',
      link: '#/services',
      digits: 2,
      lines: [
        { label: t('overview.line.pushes'), value: (s) => s.pushes },
        { label: t('overview.line.pushFailures'), value: (s) => s.pushFailures, color: '#f5222d' },
      ],
    },
    {
      key: 'raft',
      title: 'overview.raft',
      hint: 'overview.raftHint',
      link: '#/cluster',
      lines: [
        { label: t('overview.line.commit'), value: (s) => s.raft.commit },
        { label: t('overview.line.applied'), value: (s) => s.raft.applied, color: '#52c41a' },
      ],
    },
    {
      key: 'lag',
      title: 'overview.lag',
      hint: 'overview.lagHint',
      link: '#/cluster',
      empty: raft?.state === 'leader' ? 'overview.noMembers' : 'overview.notLeader',
      lines: members.map((id) => ({
        label: t('overview.line.member', { id }),
        value: (s: Sample) => s.raft.lag[id] ?? null,
      })),
    },
    {
      key: 'guard',
      title: 'overview.guard',
      hint: 'overview.guardHint',
      link: '#/cluster',
      lines: [{ label: t('overview.line.guard'), value: (s) => s.guardEngaged.length, color: '#fa8c16' }],
    },
    {
      key: 'sync',
      title: 'overview.sync',
      hint: 'overview.syncHint',
      link: isAdmin ? '#/sync' : undefined,
      lines: TASK_STATES.map((state) => ({
        label: t(`sync.state.${state}` as MessageKey),
        value: (s: Sample) => s.syncTasks[state] ?? 0,
        color: state === 'error' ? '#f5222d' : undefined,
      })),
    },
  ];

  const guard = now?.guardEngaged ?? [];
  const syncErrors = now?.syncTasks.error ?? 0;

  return (
    <div className="page" data-testid="overview-page">
      <PageTitle
        title={t('overview.title')}
        subtitle={win ? t('overview.subtitleNode', { node: win.node }) : t('overview.subtitle')}
        extra={
          <AutoRefreshControls
            id="overview"
            label={t('overview.autoRefresh')}
            auto={auto}
            onAuto={setAuto}
            updated={updated}
            onRefresh={() => res.reload({ silent: true })}
          />
        }
      />
      {win === undefined && res.error !== undefined ? (
        <Card>
          <LoadError error={res.error} onRetry={() => res.reload()} />
        </Card>
      ) : win === undefined || now === undefined || raft === undefined ? (
        <Card>
          <Skeleton active />
        </Card>
      ) : (
        <>
          <RefreshError error={res.error} />
          <Card className="summary-card" data-testid="overview-summary">
            <Row gutter={[16, 8]}>
              <Col xs={12} md={4}>
                <Statistic title={t('overview.line.instances')} value={now.instances} />
              </Col>
              <Col xs={12} md={4}>
                <Statistic title={t('overview.line.healthy')} value={now.healthy} />
              </Col>
              <Col xs={12} md={4}>
                <Statistic
                  title={t('cluster.state')}
                  valueRender={() => <Tag data-testid="overview-state">{t(`cluster.role.${raft.state}` as MessageKey)}</Tag>}
                />
              </Col>
              <Col xs={12} md={4}>
                <Statistic title={t('cluster.term')} value={raft.term} />
              </Col>
              <Col xs={12} md={4}>
                <Statistic title={t('cluster.leader')} value={raft.leader ?? t('cluster.noLeader')} />
              </Col>
              <Col xs={12} md={4}>
                <Statistic
                  title={t('cluster.guard')}
                  valueRender={() =>
                    guard.length === 0 ? (
                      <Badge status="success" text={t('cluster.guardOff')} />
                    ) : (
                      <Badge status="warning" text={t('cluster.guardOn', { list: guard.join(', ') })} />
                    )
                  }
                />
              </Col>
            </Row>
            {syncErrors > 0 && (
              <Typography.Text type="danger">{t('overview.syncErrors', { count: syncErrors })}</Typography.Text>
            )}
          </Card>
          <Row gutter={[16, 16]}>
            {charts.map((c) => (
              <Col key={c.key} xs={24} xl={12}>
                <ChartCard spec={c} samples={win.samples} windowMs={win.windowMs} />
              </Col>
            ))}
          </Row>
        </>
      )}
    </div>
  );
}

function ChartCard({ spec, samples, windowMs }: { spec: ChartSpec; samples: Sample[]; windowMs: number }) {
  const t = useT();
  const title = spec.link ? (
    <a href={spec.link} data-testid={`chart-link-${spec.key}`}>
      {t(spec.title)}
    </a>
  ) : (
    t(spec.title)
  );
  return (
    <Card
      size="small"
      className="chart-card"
      title={title}
      extra={<Typography.Text type="secondary">{t(spec.hint)}</Typography.Text>}
    >
      {spec.lines.length === 0 ? (
        <Typography.Text type="secondary" className="chart-empty">
          {t(spec.empty ?? 'overview.notLeader')}
        </Typography.Text>
      ) : (
        <Chart spec={spec} samples={samples} windowMs={windowMs} />
      )}
    </Card>
  );
}

const HEIGHT = 170;

/**
 * The time axis: the node's window ending at the newest sample, whatever the samples
 * span (uPlot's own range around a single sample spans years).
 */
export function timeRange(newestSecs: number | null | undefined, windowMs: number): [number, number] {
  const end = newestSecs ?? Date.now() / 1000;
  return [end - windowMs / 1000, end];
}

/** One uPlot chart; recreated when its lines change, fed new data otherwise. */
function Chart({ spec, samples, windowMs }: { spec: ChartSpec; samples: Sample[]; windowMs: number }) {
  const t = useT();
  const timeLabel = t('overview.time');
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const labels = spec.lines.map((l) => l.label).join('\u0000');
  const data = useMemo<uPlot.AlignedData>(
    () => [samples.map((s) => s.t / 1000), ...spec.lines.map((l) => samples.map((s) => l.value(s)))],
    // spec.lines' functions are new on each render; the labels say what they read
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [samples, labels],
  );
  const dataRef = useRef(data);
  dataRef.current = data;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const digits = spec.digits ?? 0;
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 200),
      height: HEIGHT,
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      scales: { x: { time: true, range: (_u, _min, max) => timeRange(max, windowMs) }, y: { range: (_u, min, max) => [Math.min(0, min), Math.max(1, max * 1.1)] } },
      axes: [{ stroke: '#8c8c8c' }, { stroke: '#8c8c8c', size: 56 }],
      hooks: {
        // the drawn time axis, for the browser test: the node's window, never more
        setScale: [
          (u: uPlot, key: string) => {
            if (key !== 'x') return;
            el.dataset.xMin = String(u.scales.x.min ?? '');
            el.dataset.xMax = String(u.scales.x.max ?? '');
          },
        ],
      },
      series: [
        { label: timeLabel },
        ...spec.lines.map((l, i) => ({
          label: l.label,
          stroke: l.color ?? COLORS[i % COLORS.length],
          width: 1.5,
          spanGaps: false,
          value: (_u: uPlot, v: number | null) => (v === null || v === undefined ? '—' : v.toFixed(digits)),
        })),
      ],
    };
    const u = new uPlot(opts, dataRef.current, el);
    u.setLegend({ idx: dataRef.current[0].length - 1 });
    plot.current = u;
    const resize = new ResizeObserver(() => {
      const width = Math.max(el.clientWidth, 200);
      if (width !== u.width) u.setSize({ width, height: HEIGHT });
    });
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [labels, spec.digits, timeLabel, windowMs]);

  useEffect(() => {
    const u = plot.current;
    if (!u) return;
    u.setData(data);
    // the legend shows the newest figures while the pointer is elsewhere
    if (u.cursor.idx === null || u.cursor.idx === undefined) u.setLegend({ idx: data[0].length - 1 });
  }, [data]);

  return (
    <div
      ref={box}
      className="chart"
      data-testid={`chart-${spec.key}`}
      data-points={samples.length}
      data-last={samples.length > 0 ? samples[samples.length - 1].t : 0}
      role="img"
      aria-label={spec.lines.map((l) => l.label).join(', ')}
    />
  );
}

/** Re-exported for the lazy import in App.tsx. */
export default OverviewPage;
