import {
  App,
  Badge,
  Breadcrumb,
  Button,
  Card,
  Descriptions,
  Form,
  Input,
  InputNumber,
  Select,
  Skeleton,
  Space,
  Switch,
  Table,
  Tag,
  Tooltip,
  Typography,
} from 'antd';
import {
  CodeOutlined,
  EditOutlined,
  FilterOutlined,
  PauseCircleOutlined,
  PlayCircleOutlined,
  ReloadOutlined,
  SafetyCertificateOutlined,
} from '@ant-design/icons';
import { useEffect, useState } from 'react';
import { ApiError, call, isForbidden, type ClusterInfo, type Instance, type ServiceDetail, type Subscriber } from '../api';
import { useT } from '../i18n';
import { useDebounced, useDialog, usePaging, useResource } from '../hooks';
import { useLive, type ServiceEvent } from '../live';
import { href, navigate, type Route } from '../router';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { SampleCodeDialog } from '../components/SampleCode';
import { EmptyState, InstanceMeta, LiveBadge, LoadError, MetaChips, Notice, RefreshError } from '../components/bits';
import { ServiceFormFields, serviceInitial, serviceParams, type ServiceValues } from '../components/ServiceForm';
import { errorMessage, num, threshold } from '../format';
import { formatMetadata, metadataRule, parseMetadata } from '../metadata';

export function ServiceDetailPage({ route }: { route: Route }) {
  const t = useT();
  const [, namespaceId, groupName, serviceName] = route.segments;
  if (!namespaceId || !groupName || !serviceName || route.segments.length !== 4) {
    return (
      <Notice
        kind="missing"
        title="404"
        detail={t('common.notFound')}
        extra={<Button onClick={() => navigate('/namespaces')}>{t('common.goHome')}</Button>}
      />
    );
  }
  return (
    <Detail
      key={`${namespaceId}/${groupName}/${serviceName}`}
      namespaceId={namespaceId}
      groupName={groupName}
      serviceName={serviceName}
    />
  );
}

interface Ids {
  namespaceId: string;
  groupName: string;
  serviceName: string;
}

function Detail(ids: Ids) {
  const { namespaceId, groupName, serviceName } = ids;
  const t = useT();
  const { message } = App.useApp();
  const detail = useResource(
    () => call<ServiceDetail>('GET', '/nacos/v1/ns/catalog/service', { namespaceId, serviceName, groupName }),
    [],
  );
  // bumped to make every cluster table refetch quietly
  const [tick, setTick] = useState(0);
  const [subPage, setSubPage] = useState(1);
  const [subSize, setSubSize] = useState(10);
  const subs = useResource(
    () =>
      call<{ count: number; subscribers: Subscriber[] }>('GET', '/nacos/v1/ns/service/subscribers', {
        namespaceId,
        serviceName,
        groupName,
        pageNo: subPage,
        pageSize: subSize,
      }),
    [subPage, subSize],
  );

  const refreshAll = async () => {
    setTick((x) => x + 1);
    await Promise.all([detail.reload({ silent: true }), subs.reload({ silent: true })]);
  };
  const matches = (ev: ServiceEvent) =>
    (ev.groupName === undefined || ev.groupName === groupName) &&
    (ev.serviceName === serviceName || ev.serviceName === `${groupName}@@${serviceName}`);
  // No access (403): said once, and neither streamed nor polled.
  const forbidden = isForbidden(detail.error);
  const answered = detail.data !== undefined || detail.error !== undefined;
  const live = useLive({ service: { matches, refresh: refreshAll } }, { namespaceId, enabled: answered && !forbidden });

  const [svcForm] = Form.useForm<ServiceValues>();
  const editSvc = useDialog<true>();
  const samples = useDialog<true>();
  const svc = detail.data?.service;

  // The metadata filter. The server parses and applies it: each cluster's table asks
  // /catalog/instances with it (which keeps disabled instances, unlike a list query).
  // It is first checked once by /api/v1/instances, so that a typo is one message under
  // the input rather than an error in every cluster's table; while the input does not
  // parse, the tables keep the last filter that did.
  const [selectorInput, setSelectorInput] = useState('');
  const typed = useDebounced(selectorInput.trim(), 300);
  const [selector, setSelector] = useState('');
  const [selectorError, setSelectorError] = useState<string | null>(null);
  useEffect(() => {
    if (typed === '') {
      setSelector('');
      setSelectorError(null);
      return;
    }
    let stale = false;
    call('GET', '/api/v1/instances', { namespaceId, groupName, serviceName, selector: typed }).then(
      () => {
        if (stale) return;
        setSelector(typed);
        setSelectorError(null);
      },
      (e: unknown) => {
        if (stale) return;
        if (e instanceof ApiError && e.status === 400) setSelectorError(errorMessage(e, t));
        else {
          // not a verdict on the expression (a network error, a 403): let the tables say it
          setSelector(typed);
          setSelectorError(null);
        }
      },
    );
    return () => {
      stale = true;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [typed]);

  const saveService = async (v: ServiceValues) => {
    await call('PUT', '/nacos/v1/ns/service', serviceParams(namespaceId, { ...v, serviceName, groupName }, t, false));
    message.success(t('svc.saved', { name: serviceName }));
    editSvc.hide();
    await detail.reload({ silent: true });
  };

  const servicesLink = href('/services', { namespaceId });

  let body;
  if (detail.error !== undefined && (detail.data === undefined || forbidden)) {
    body = (
      <Card>
        <LoadError error={detail.error} onRetry={() => detail.reload()} />
      </Card>
    );
  } else if (!svc) {
    body = (
      <Card>
        <Skeleton active paragraph={{ rows: 4 }} />
      </Card>
    );
  } else {
    const clusters = [...(detail.data?.clusters ?? [])].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const sel = svc.selector;
    body = (
      <>
        <RefreshError error={detail.error} />
        <Card
          className="svc-header"
          title={
            <Space size={10}>
              <span className="svc-name" data-testid="detail-name">
                {svc.name}
              </span>
              <Tag bordered={false}>{svc.groupName}</Tag>
            </Space>
          }
          extra={
            <Space>
              <LiveBadge mode={live} />
              <Button icon={<ReloadOutlined />} onClick={() => void refreshAll()} data-testid="detail-refresh">
                {t('common.refresh')}
              </Button>
              <Button icon={<CodeOutlined />} onClick={() => samples.show(true)} data-testid="sample-code">
                {t('detail.sampleCode')}
              </Button>
              <Button type="primary" icon={<EditOutlined />} onClick={() => editSvc.show(true)} data-testid="svc-edit">
                {t('svc.edit')}
              </Button>
            </Space>
          }
        >
          <Descriptions
            column={{ xs: 1, sm: 2, lg: 3 }}
            size="small"
            items={[
              { key: 'ns', label: t('detail.namespace'), children: <Typography.Text code>{namespaceId}</Typography.Text> },
              { key: 'group', label: t('svc.group'), children: svc.groupName },
              {
                key: 'threshold',
                label: t('svc.threshold'),
                children: <span data-testid="detail-threshold">{threshold(svc.protectThreshold, t)}</span>,
              },
              {
                key: 'selector',
                label: t('svc.selector'),
                span: { xs: 1, sm: 2, lg: 3 },
                children:
                  !sel || !sel.type || sel.type === 'none' ? (
                    <Typography.Text type="secondary">{t('svc.selectorNone')}</Typography.Text>
                  ) : (
                    <Space size={6}>
                      <Tag color={sel.type === 'metadata' ? 'blue' : 'default'}>{sel.type}</Tag>
                      <Typography.Text code>{sel.expression}</Typography.Text>
                    </Space>
                  ),
              },
              {
                key: 'meta',
                label: t('svc.metadata'),
                span: { xs: 1, sm: 2, lg: 3 },
                children: <MetaChips meta={svc.metadata} max={50} />,
              },
            ]}
          />
        </Card>

        {clusters.length > 0 && (
          <Card className="inst-filter-card" size="small">
            <div className="inst-filter">
              <label htmlFor="inst-selector" className="inst-filter-label">
                <FilterOutlined aria-hidden /> {t('detail.selectorFilter')}
              </label>
              <Input
                id="inst-selector"
                allowClear
                className="mono"
                placeholder="env=prod,zone in (a,b),!canary"
                value={selectorInput}
                status={selectorError ? 'error' : undefined}
                onChange={(e) => setSelectorInput(e.target.value)}
                aria-describedby="inst-selector-help"
                aria-invalid={selectorError ? true : undefined}
                spellCheck={false}
                data-testid="inst-selector"
              />
            </div>
            <div id="inst-selector-help" className="inst-filter-help">
              {selectorError ? (
                <Typography.Text type="danger" data-testid="inst-selector-error" role="alert">
                  {selectorError} {selector !== '' && t('detail.selectorKept')}
                </Typography.Text>
              ) : (
                <Typography.Text type="secondary">{t('detail.selectorFilterHint')}</Typography.Text>
              )}
            </div>
          </Card>
        )}

        {clusters.length === 0 ? (
          <Card className="cluster-card">
            <EmptyState
              text={
                <span>
                  <Typography.Text strong>{t('detail.noClusters')}</Typography.Text>
                  <br />
                  <Typography.Text type="secondary">{t('detail.noClustersHint')}</Typography.Text>
                </span>
              }
            />
          </Card>
        ) : (
          clusters.map((c) => (
            <ClusterSection key={c.name} ids={ids} cluster={c} tick={tick} selector={selector} onChanged={refreshAll} />
          ))
        )}

        <Card
          className="table-card"
          title={
            <Space size={10} align="baseline">
              <span>{t('detail.subscribers')}</span>
              <Typography.Text type="secondary" className="card-hint">
                {t('detail.subscribersHint')}
              </Typography.Text>
            </Space>
          }
        >
          <RefreshError error={subs.data !== undefined ? subs.error : undefined} />
          {subs.data === undefined && subs.error !== undefined ? (
            <LoadError error={subs.error} onRetry={() => subs.reload()} />
          ) : (
            <Table<Subscriber>
              data-testid="subscribers-table"
              size="small"
              rowKey={(r) => `${r.addrStr}|${r.agent ?? ''}|${r.cluster ?? ''}|${r.protocol ?? ''}`}
              dataSource={subs.data?.subscribers}
              loading={subs.loading}
              locale={{ emptyText: subs.loading ? ' ' : <EmptyState text={t('detail.noSubscribers')} /> }}
              pagination={{
                current: subPage,
                pageSize: subSize,
                total: subs.data?.count ?? 0,
                hideOnSinglePage: true,
                showTotal: (n) => t('common.total', { count: n }),
                onChange: (p, s) => {
                  setSubPage(s !== subSize ? 1 : p);
                  setSubSize(s);
                },
              }}
              columns={[
                {
                  title: t('detail.address'),
                  dataIndex: 'addrStr',
                  key: 'addr',
                  render: (a: string) => <span className="mono">{a}</span>,
                },
                {
                  title: t('detail.protocol'),
                  dataIndex: 'protocol',
                  key: 'protocol',
                  width: 110,
                  render: (p?: string) =>
                    p ? <Tag color={p.toLowerCase() === 'grpc' ? 'geekblue' : 'cyan'}>{p.toUpperCase() === 'GRPC' ? 'gRPC' : p.toUpperCase()}</Tag> : '—',
                },
                { title: t('detail.agent'), dataIndex: 'agent', key: 'agent', render: (a?: string) => a || '—' },
                { title: t('detail.app'), dataIndex: 'app', key: 'app', render: (a?: string) => a || '—' },
                { title: t('detail.subCluster'), dataIndex: 'cluster', key: 'cluster', render: (c?: string) => c || '—' },
              ]}
            />
          )}
        </Card>
      </>
    );
  }

  return (
    <div className="page">
      <Breadcrumb
        className="crumbs"
        items={[
          { title: <a href={'#' + servicesLink}>{t('nav.services')}</a> },
          { title: <a href={'#' + servicesLink}>{namespaceId}</a> },
          { title: groupName },
          { title: <span data-testid="crumb-service">{serviceName}</span> },
        ]}
      />
      {body}
      <FormModal<ServiceValues>
        open={editSvc.open}
        title={t('svc.edit')}
        testid="svc-form"
        form={svcForm}
        width={620}
        initialValues={svc ? serviceInitial(svc) : undefined}
        onCancel={editSvc.hide}
        onSubmit={saveService}
      >
        <ServiceFormFields creating={false} />
      </FormModal>
      <SampleCodeDialog
        open={samples.open}
        target={{ server: window.location.host, namespaceId, groupName, serviceName }}
        onClose={samples.hide}
      />
    </div>
  );
}

interface InstanceValues {
  weight: number;
  enabled: boolean;
  metadata?: string;
}

interface ClusterValues {
  type: string;
  checkPort: number;
  useInstancePort4Check: boolean;
  path?: string;
  headers?: string;
  expectedResponseCode?: number;
  metadata?: string;
}

/** How many instance updates a batch keeps in flight: quick, without a burst of writes. */
const BATCH_IN_FLIGHT = 4;

/** Runs `work` on every item with at most `limit` running; the error of each, or null. */
async function eachBounded<T>(items: T[], limit: number, work: (item: T) => Promise<unknown>): Promise<(unknown | null)[]> {
  const outcomes: (unknown | null)[] = new Array(items.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      try {
        await work(items[i]);
      } catch (e) {
        outcomes[i] = e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return outcomes;
}

function ClusterSection({
  ids,
  cluster,
  tick,
  selector,
  onChanged,
}: {
  ids: Ids;
  cluster: ClusterInfo;
  tick: number;
  /** A metadata selector the server filters the instances by ('' for all). */
  selector: string;
  onChanged(): Promise<void>;
}) {
  const t = useT();
  const { message } = App.useApp();
  const { namespaceId, groupName, serviceName } = ids;
  const { page, pageSize, setPage, pagination } = usePaging();
  const res = useResource(
    () =>
      call<{ count: number; list: Instance[] }>('GET', '/nacos/v1/ns/catalog/instances', {
        namespaceId,
        serviceName,
        groupName,
        clusterName: cluster.name,
        selector: selector || undefined,
        pageNo: page,
        pageSize,
      }),
    [page, pageSize, selector],
  );
  useEffect(() => setPage(1), [selector]);
  // The rows ticked for a batch take-offline / bring-online: of the page shown, so
  // cleared when another page or filter shows other rows.
  const [selected, setSelected] = useState<Instance[]>([]);
  useEffect(() => setSelected([]), [page, pageSize, selector]);
  const batch = useDialog<{ enable: boolean; targets: Instance[] }>();
  useEffect(() => {
    if (tick > 0) void res.reload({ silent: true });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [tick]);

  const [instForm] = Form.useForm<InstanceValues>();
  const editInst = useDialog<Instance>();
  const [clusterForm] = Form.useForm<ClusterValues>();
  const editCluster = useDialog<true>();
  const [toggling, setToggling] = useState<string | null>(null);

  const addr = (i: Instance) => `${i.ip}:${i.port}`;
  const ident = (i: Instance) => ({
    namespaceId,
    serviceName,
    groupName,
    clusterName: i.clusterName || cluster.name,
    ip: i.ip,
    port: i.port,
    ephemeral: i.ephemeral,
  });

  const toggle = async (i: Instance) => {
    setToggling(addr(i));
    try {
      await call('PUT', '/nacos/v1/ns/instance', { ...ident(i), enabled: !i.enabled });
      message.success(t(i.enabled ? 'detail.wentOffline' : 'detail.wentOnline', { addr: addr(i) }));
      await res.reload({ silent: true });
      void onChanged();
    } catch (e) {
      message.error({ content: errorMessage(e, t), key: 'toggle-error' });
    } finally {
      setToggling(null);
    }
  };

  // The same call as one row's toggle, once per instance, a few at a time; what failed is
  // named in the message rather than stopping the rest.
  const runBatch = async () => {
    if (!batch.target) return;
    const { enable, targets } = batch.target;
    const outcomes = await eachBounded(targets, BATCH_IN_FLIGHT, (i) =>
      call('PUT', '/nacos/v1/ns/instance', { ...ident(i), enabled: enable }),
    );
    const failures = targets.flatMap((i, n) => (outcomes[n] === null ? [] : [`${addr(i)}: ${errorMessage(outcomes[n], t)}`]));
    batch.hide();
    setSelected([]);
    if (failures.length === 0) {
      message.success(t(enable ? 'detail.batchDoneOnline' : 'detail.batchDoneOffline', { count: targets.length }));
    } else {
      message.error({
        content: t('detail.batchFailed', { ok: targets.length - failures.length, total: targets.length, failures: failures.join('; ') }),
        key: 'batch-error',
        duration: 10,
      });
    }
    await res.reload({ silent: true });
    void onChanged();
  };

  const saveInstance = async (v: InstanceValues) => {
    const i = editInst.target;
    if (!i) return;
    const metadata = parseMetadata(v.metadata ?? '', t);
    await call('PUT', '/nacos/v1/ns/instance', {
      ...ident(i),
      weight: v.weight,
      enabled: v.enabled,
      metadata: JSON.stringify(metadata),
    });
    message.success(t('detail.instanceSaved', { addr: addr(i) }));
    editInst.hide();
    await res.reload({ silent: true });
    void onChanged();
  };

  const hc = cluster.healthChecker ?? { type: 'TCP' };
  const saveCluster = async (v: ClusterValues) => {
    const checker: Record<string, unknown> = { type: v.type };
    if (v.type === 'HTTP') {
      checker.path = v.path ?? '';
      checker.headers = v.headers ?? '';
      checker.expectedResponseCode = v.expectedResponseCode ?? 200;
    }
    await call('PUT', '/nacos/v1/ns/cluster', {
      namespaceId,
      serviceName,
      groupName,
      clusterName: cluster.name,
      checkPort: v.checkPort,
      useInstancePort4Check: v.useInstancePort4Check,
      healthChecker: JSON.stringify(checker),
      metadata: JSON.stringify(parseMetadata(v.metadata ?? '', t)),
    });
    message.success(t('detail.clusterSaved', { name: cluster.name }));
    editCluster.hide();
    await onChanged();
  };

  const checkerLabel =
    hc.type === 'HTTP' ? `HTTP ${hc.path ?? ''}`.trim() : hc.type === 'NONE' ? t('detail.checkerNone') : hc.type;

  const columns = [
    {
      title: t('detail.ip'),
      dataIndex: 'ip',
      key: 'ip',
      width: 130,
      render: (ip: string) => <span className="mono">{ip}</span>,
    },
    { title: t('detail.port'), dataIndex: 'port', key: 'port', width: 72, render: (p: number) => <span className="mono">{p}</span> },
    {
      title: t('detail.health'),
      dataIndex: 'healthy',
      key: 'healthy',
      width: 110,
      render: (h: boolean, i: Instance) => (
        <span data-testid={`inst-health-${addr(i)}`} data-healthy={String(h)}>
          <Badge status={h ? 'success' : 'error'} text={h ? t('detail.healthy') : t('detail.unhealthy')} />
        </span>
      ),
    },
    {
      title: t('detail.weight'),
      dataIndex: 'weight',
      key: 'weight',
      width: 80,
      align: 'right' as const,
      render: (w: number, i: Instance) => <span data-testid={`inst-weight-${addr(i)}`}>{num(w)}</span>,
    },
    {
      title: t('detail.enabled'),
      dataIndex: 'enabled',
      key: 'enabled',
      width: 90,
      render: (e: boolean, i: Instance) => (
        <Tag color={e ? 'green' : 'default'} data-testid={`inst-enabled-${addr(i)}`} data-enabled={String(e)}>
          {e ? t('detail.online') : t('detail.offline')}
        </Tag>
      ),
    },
    {
      title: t('detail.ephemeral'),
      dataIndex: 'ephemeral',
      key: 'ephemeral',
      width: 96,
      render: (e: boolean) => (
        <Tag bordered={false} color={e ? 'gold' : 'purple'}>
          {e ? t('detail.kindEphemeral') : t('detail.kindPersistent')}
        </Tag>
      ),
    },
    {
      title: t('detail.registeredBy'),
      dataIndex: 'registeredBy',
      key: 'registeredBy',
      width: 120,
      render: (_: unknown, i: Instance) => <FaceTag instance={i} testid={`inst-face-${addr(i)}`} />,
    },
    {
      title: t('detail.metadata'),
      dataIndex: 'metadata',
      key: 'metadata',
      className: 'meta-cell',
      render: (m: Record<string, string> | undefined) => <InstanceMeta meta={m} />,
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 200,
      render: (_: unknown, i: Instance) => (
        <Space size={0}>
          <Button type="link" size="small" icon={<EditOutlined />} data-testid={`inst-edit-${addr(i)}`} onClick={() => editInst.show(i)}>
            {t('common.edit')}
          </Button>
          <Button
            type="link"
            size="small"
            danger={i.enabled}
            loading={toggling === addr(i)}
            icon={i.enabled ? <PauseCircleOutlined /> : <PlayCircleOutlined />}
            data-testid={`inst-toggle-${addr(i)}`}
            onClick={() => void toggle(i)}
          >
            {i.enabled ? t('detail.goOffline') : t('detail.goOnline')}
          </Button>
        </Space>
      ),
    },
  ];

  const target = editInst.target;
  return (
    <Card
      className="table-card cluster-card"
      data-testid={`cluster-${cluster.name}`}
      title={
        <Space size={10}>
          <span>{t('detail.cluster', { name: cluster.name })}</span>
          <Tooltip title={t('detail.persistentOnly')}>
            <Tag icon={<SafetyCertificateOutlined />} bordered={false} color="processing">
              {t('detail.checker', { type: checkerLabel })}
            </Tag>
          </Tooltip>
        </Space>
      }
      extra={
        <Space size={8}>
          <Button
            size="small"
            danger
            icon={<PauseCircleOutlined />}
            disabled={selected.length === 0}
            onClick={() => batch.show({ enable: false, targets: selected })}
            data-testid={`batch-offline-${cluster.name}`}
          >
            {t('detail.batchOffline', { count: selected.length })}
          </Button>
          <Button
            size="small"
            icon={<PlayCircleOutlined />}
            disabled={selected.length === 0}
            onClick={() => batch.show({ enable: true, targets: selected })}
            data-testid={`batch-online-${cluster.name}`}
          >
            {t('detail.batchOnline', { count: selected.length })}
          </Button>
          <Button size="small" icon={<EditOutlined />} onClick={() => editCluster.show(true)} data-testid={`cluster-edit-${cluster.name}`}>
            {t('detail.editCluster')}
          </Button>
        </Space>
      }
    >
      <RefreshError error={res.data !== undefined ? res.error : undefined} />
      {res.data === undefined && res.error !== undefined ? (
        <LoadError error={res.error} onRetry={() => res.reload()} />
      ) : (
        <Table<Instance>
          size="middle"
          tableLayout="fixed"
          rowKey={(i) => addr(i)}
          rowSelection={{
            selectedRowKeys: selected.map(addr),
            onChange: (_keys, rows) => setSelected(rows),
            columnWidth: 40,
            getCheckboxProps: (i) => ({ 'aria-label': t('detail.selectInstance', { addr: addr(i) }) }) as object,
          }}
          columns={columns}
          dataSource={res.data?.list}
          loading={res.loading}
          rowClassName={(i) => (i.enabled ? '' : 'row-offline')}
          locale={{ emptyText: res.loading ? ' ' : <EmptyState text={t('detail.noInstances')} /> }}
          pagination={pagination(res.data?.count ?? 0)}
        />
      )}

      <FormModal<InstanceValues>
        open={editInst.open}
        title={t('detail.editInstance', { addr: target ? addr(target) : '' })}
        testid="inst-form"
        form={instForm}
        initialValues={
          target ? { weight: target.weight, enabled: target.enabled, metadata: formatMetadata(target.metadata) } : undefined
        }
        onCancel={editInst.hide}
        onSubmit={saveInstance}
      >
        <div className="form-row">
          <Form.Item label={t('detail.ip')} htmlFor="inst-form-ip" style={{ flex: 2 }}>
            <Input id="inst-form-ip" value={target?.ip} disabled className="mono" />
          </Form.Item>
          <Form.Item label={t('detail.port')} htmlFor="inst-form-port" style={{ flex: 1 }}>
            <Input id="inst-form-port" value={target?.port} disabled className="mono" />
          </Form.Item>
        </div>
        <div className="form-row">
          <Form.Item
            name="weight"
            label={t('detail.weight')}
            extra={t('detail.weightHint')}
            rules={[{ required: true, message: t('detail.weightRequired') }]}
            style={{ flex: 2 }}
          >
            <InputNumber min={0} max={10000} step={1} style={{ width: '100%' }} data-testid="inst-form-weight" />
          </Form.Item>
          <Form.Item name="enabled" label={t('detail.enabledLabel')} valuePropName="checked" style={{ flex: 1 }}>
            <Switch data-testid="inst-form-enabled" />
          </Form.Item>
        </div>
        <Form.Item name="metadata" label={t('detail.metadata')} extra={t('meta.hint')} rules={[metadataRule(t)]}>
          <Input.TextArea autoSize={{ minRows: 4, maxRows: 12 }} className="mono" spellCheck={false} data-testid="inst-form-metadata" />
        </Form.Item>
      </FormModal>

      <ConfirmDialog
        open={batch.open}
        title={t(batch.target?.enable ? 'detail.batchOnlineTitle' : 'detail.batchOfflineTitle', {
          count: batch.target?.targets.length ?? 0,
        })}
        body={t(batch.target?.enable ? 'detail.batchOnlineBody' : 'detail.batchOfflineBody', {
          list: (batch.target?.targets ?? []).map(addr).join(', '),
        })}
        okText={batch.target?.enable ? t('detail.goOnline') : t('detail.goOffline')}
        onCancel={batch.hide}
        onConfirm={runBatch}
      />

      <FormModal<ClusterValues>
        open={editCluster.open}
        title={t('detail.editClusterTitle', { name: cluster.name })}
        testid="cluster-form"
        form={clusterForm}
        width={580}
        initialValues={{
          type: hc.type || 'TCP',
          checkPort: cluster.defaultCheckPort ?? 80,
          useInstancePort4Check: cluster.useIPPort4Check ?? true,
          path: hc.path ?? '',
          headers: hc.headers ?? '',
          expectedResponseCode: hc.expectedResponseCode ?? 200,
          metadata: formatMetadata(cluster.metadata),
        }}
        onCancel={editCluster.hide}
        onSubmit={saveCluster}
      >
        <Typography.Paragraph type="secondary">{t('detail.persistentOnly')}</Typography.Paragraph>
        <div className="form-row">
          <Form.Item name="type" label={t('detail.checkerType')} style={{ flex: 1 }}>
            <Select
              data-testid="cluster-form-type"
              options={[
                { value: 'TCP', label: t('detail.checkerTcp') },
                { value: 'HTTP', label: t('detail.checkerHttp') },
                { value: 'NONE', label: t('detail.checkerNone') },
              ]}
            />
          </Form.Item>
          <Form.Item name="useInstancePort4Check" label={t('detail.useInstancePort')} valuePropName="checked" style={{ flex: 'none' }}>
            <Switch />
          </Form.Item>
          <Form.Item noStyle shouldUpdate={(a, b) => a.useInstancePort4Check !== b.useInstancePort4Check}>
            {({ getFieldValue }) => (
              <Form.Item name="checkPort" label={t('detail.checkPort')} style={{ width: 120, flex: 'none' }}>
                <InputNumber min={0} max={65535} style={{ width: '100%' }} disabled={getFieldValue('useInstancePort4Check')} />
              </Form.Item>
            )}
          </Form.Item>
        </div>
        <Form.Item noStyle shouldUpdate={(a, b) => a.type !== b.type}>
          {({ getFieldValue }) =>
            getFieldValue('type') === 'HTTP' && (
              <>
                <div className="form-row">
                  <Form.Item name="path" label={t('detail.httpPath')} style={{ flex: 2 }}>
                    <Input className="mono" placeholder="/health" />
                  </Form.Item>
                  <Form.Item name="expectedResponseCode" label={t('detail.expectedCode')} style={{ flex: 1 }}>
                    <InputNumber min={100} max={599} style={{ width: '100%' }} />
                  </Form.Item>
                </div>
                <Form.Item name="headers" label={t('detail.httpHeaders')} extra={t('detail.httpHeadersHint')}>
                  <Input className="mono" />
                </Form.Item>
              </>
            )
          }
        </Form.Item>
        <Form.Item name="metadata" label={t('detail.clusterMetadata')} extra={t('meta.hint')} rules={[metadataRule(t)]}>
          <Input.TextArea autoSize={{ minRows: 2, maxRows: 8 }} className="mono" spellCheck={false} />
        </Form.Item>
      </FormModal>
    </Card>
  );
}

/** The face that registered an instance, as a tag: the product's name, a sync task's
 * name after "Sync:", and a tooltip where the name alone does not say enough. */
function FaceTag({ instance, testid }: { instance: Instance; testid: string }) {
  const t = useT();
  const face = instance.registeredBy;
  if (!face) return <Typography.Text type="secondary">—</Typography.Text>;
  const task = instance.registeredByTask ?? '';
  const [label, hint, color] =
    face === 'consul'
      ? ['Consul', undefined, 'magenta']
      : face === 'eureka'
        ? ['Eureka', undefined, 'green']
        : face === 'grpc'
          ? ['Nacos gRPC', t('detail.faceGrpcHint'), 'blue']
          : face === 'sync'
            ? [t('detail.faceSync', { task }), t('detail.faceSyncHint', { task }), 'orange']
            : ['HTTP', t('detail.faceHttpHint'), 'default'];
  const tag = (
    <Tag bordered={false} color={color} className="face-tag" data-testid={testid} data-face={face} data-task={task || undefined}>
      {label}
    </Tag>
  );
  return hint ? <Tooltip title={hint}>{tag}</Tooltip> : tag;
}
