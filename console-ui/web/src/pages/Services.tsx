import { App, Button, Card, Form, Input, Space, Switch, Table, Tag, Typography } from 'antd';
import { DeleteOutlined, PlusOutlined, ProfileOutlined, ReloadOutlined, SearchOutlined } from '@ant-design/icons';
import { useEffect, useState } from 'react';
import { call, isForbidden, type ServiceRow } from '../api';
import { useT } from '../i18n';
import { useDebounced, useDialog, usePaging, useResource } from '../hooks';
import { useLive } from '../live';
import { navigate, serviceHref, type Route } from '../router';
import { KEYS, load, save } from '../storage';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { EmptyState, LiveBadge, LoadError, PageTitle, RefreshError } from '../components/bits';
import { ServiceFormFields, serviceInitial, serviceParams, type ServiceValues } from '../components/ServiceForm';
import { num, threshold, truthy } from '../format';
import { NamespaceBar, PickNamespace } from '../components/NamespaceBar';
import { fetchNamespaces } from './Namespaces';

interface ServicesAnswer {
  count: number;
  serviceList: ServiceRow[];
}

export function ServicesPage({ route }: { route: Route }) {
  const t = useT();
  const namespaceId = route.query.get('namespaceId');
  useEffect(() => {
    if (namespaceId) save(KEYS.namespace, namespaceId);
  }, [namespaceId]);
  if (!namespaceId) return <PickNamespace path="/services" title={t('svc.title')} />;
  return <ServicesOf key={namespaceId} namespaceId={namespaceId} />;
}

function ServicesOf({ namespaceId }: { namespaceId: string }) {
  const t = useT();
  const { message } = App.useApp();
  const [name, setName] = useState('');
  const [group, setGroup] = useState('');
  const [hideEmpty, setHideEmpty] = useState(() => load(KEYS.hideEmpty) === 'true');
  // The server filters (roster's unhealthyOnly, before paging): a page filtered here
  // would come up short and the total would count the healthy services too.
  const [unhealthyOnly, setUnhealthyOnly] = useState(false);
  const { page, pageSize, setPage, pagination } = usePaging(Number(load(KEYS.pageSize)) || 10, (size) =>
    save(KEYS.pageSize, String(size)),
  );
  const qName = useDebounced(name.trim(), 250);
  const qGroup = useDebounced(group.trim(), 250);

  const namespaces = useResource(fetchNamespaces, []);
  const res = useResource(
    () =>
      call<ServicesAnswer>('GET', '/nacos/v1/ns/catalog/services', {
        namespaceId,
        pageNo: page,
        pageSize,
        serviceNameParam: qName || undefined,
        groupNameParam: qGroup || undefined,
        hasIpCount: hideEmpty ? true : undefined,
        unhealthyOnly: unhealthyOnly ? true : undefined,
        withInstances: false,
      }),
    [namespaceId, page, pageSize, qName, qGroup, hideEmpty, unhealthyOnly],
  );
  // A namespace the user may not read is a 403: said once, not polled (every refused
  // read is a line of the audit log). The stream opens once the list came.
  const forbidden = isForbidden(res.error);
  const answered = res.data !== undefined || res.error !== undefined;
  const live = useLive(
    {
      service: { refresh: () => res.reload({ silent: true }) },
      // the namespace selector follows namespaces made or renamed elsewhere
      namespace: { refresh: () => namespaces.reload({ silent: true }) },
    },
    { namespaceId, enabled: answered && !forbidden },
  );

  useEffect(() => setPage(1), [qName, qGroup, hideEmpty, unhealthyOnly]);
  // Deleting the last row of the last page: step back.
  const count = res.data?.count ?? 0;
  useEffect(() => {
    if (res.data && res.data.serviceList.length === 0 && page > 1 && count > 0) {
      setPage(Math.max(1, Math.ceil(count / pageSize)));
    }
  }, [res.data, page, count, pageSize]);

  const [form] = Form.useForm<ServiceValues>();
  const create = useDialog<true>();
  const del = useDialog<ServiceRow>();

  const filtered = qName !== '' || qGroup !== '' || hideEmpty || unhealthyOnly;

  const columns = [
    {
      title: t('svc.name'),
      dataIndex: 'name',
      key: 'name',
      render: (n: string, r: ServiceRow) => (
        <a
          className="strong-link"
          data-testid={`svc-link-${r.groupName}-${n}`}
          href={'#' + serviceHref(namespaceId, r.groupName, n)}
        >
          {n}
        </a>
      ),
    },
    {
      title: t('svc.group'),
      dataIndex: 'groupName',
      key: 'group',
      // a group name is one word: never broken over lines (DEFAULT_GROUP)
      render: (g: string) => (
        <Typography.Text type="secondary" className="nowrap">
          {g}
        </Typography.Text>
      ),
    },
    { title: t('svc.clusters'), dataIndex: 'clusterCount', key: 'clusters', align: 'right' as const, width: 90, render: num },
    {
      title: t('svc.instances'),
      dataIndex: 'ipCount',
      key: 'ips',
      align: 'right' as const,
      width: 100,
      render: (n: number, r: ServiceRow) => <span data-testid={`svc-ips-${r.groupName}-${r.name}`}>{num(n)}</span>,
    },
    {
      title: t('svc.healthy'),
      dataIndex: 'healthyInstanceCount',
      key: 'healthy',
      align: 'right' as const,
      width: 100,
      render: (n: number, r: ServiceRow) => (
        <span className={r.ipCount > 0 && n < r.ipCount ? (n === 0 ? 'num-bad' : 'num-warn') : undefined}>{num(n)}</span>
      ),
    },
    {
      title: t('svc.threshold'),
      dataIndex: 'protectThreshold',
      key: 'threshold',
      align: 'right' as const,
      width: 130,
      className: 'wrap-head',
      render: (n: number) => threshold(n, t),
    },
    {
      title: t('svc.triggered'),
      dataIndex: 'triggerFlag',
      key: 'trigger',
      width: 130,
      className: 'wrap-head',
      render: (f: string | boolean) =>
        truthy(f) ? <Tag color="red">{t('svc.triggeredYes')}</Tag> : <Typography.Text type="secondary">{t('svc.triggeredNo')}</Typography.Text>,
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 190,
      render: (_: unknown, r: ServiceRow) => (
        <Space size={0} className="nowrap">
          <Button
            type="link"
            size="small"
            icon={<ProfileOutlined />}
            data-testid={`svc-detail-${r.groupName}-${r.name}`}
            onClick={() => navigate(serviceHref(namespaceId, r.groupName, r.name))}
          >
            {t('svc.detail')}
          </Button>
          <Button
            type="link"
            size="small"
            danger
            icon={<DeleteOutlined />}
            data-testid={`svc-delete-${r.groupName}-${r.name}`}
            onClick={() => del.show(r)}
          >
            {t('common.delete')}
          </Button>
        </Space>
      ),
    },
  ];

  const submitCreate = async (v: ServiceValues) => {
    const p = serviceParams(namespaceId, v, t, true);
    await call('POST', '/nacos/v1/ns/service', p);
    message.success(t('svc.created', { name: String(p.serviceName) }));
    create.hide();
    await res.reload({ silent: true });
  };

  const submitDelete = async () => {
    const r = del.target;
    if (!r) return;
    await call('DELETE', '/nacos/v1/ns/service', { namespaceId, serviceName: r.name, groupName: r.groupName });
    message.success(t('svc.deleted', { name: r.name }));
    del.hide();
    await res.reload({ silent: true });
  };

  return (
    <div className="page">
      <PageTitle
        title={t('svc.title')}
        extra={
          <>
            <LiveBadge mode={live} />
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="svc-refresh">
              {t('common.refresh')}
            </Button>
            <Button type="primary" icon={<PlusOutlined />} onClick={() => create.show(true)} data-testid="svc-create">
              {t('svc.create')}
            </Button>
          </>
        }
      />
      <NamespaceBar namespaceId={namespaceId} path="/services" namespaces={namespaces} forbidden={forbidden} />

      <Card className="table-card">
        <div className="filters">
          <Input
            allowClear
            prefix={<SearchOutlined />}
            placeholder={t('svc.searchName')}
            value={name}
            onChange={(e) => setName(e.target.value)}
            style={{ width: 260 }}
            data-testid="svc-search-name"
          />
          <Input
            allowClear
            placeholder={t('svc.searchGroup')}
            value={group}
            onChange={(e) => setGroup(e.target.value)}
            style={{ width: 200 }}
            data-testid="svc-search-group"
          />
          <label className="switch-label">
            <Switch
              size="small"
              checked={hideEmpty}
              data-testid="svc-hide-empty"
              onChange={(v) => {
                setHideEmpty(v);
                save(KEYS.hideEmpty, String(v));
              }}
            />
            <span>{t('svc.hideEmpty')}</span>
          </label>
          <label className="switch-label">
            <Switch size="small" checked={unhealthyOnly} data-testid="svc-unhealthy-only" onChange={setUnhealthyOnly} />
            <span>{t('svc.unhealthyOnly')}</span>
          </label>
        </div>
        <RefreshError error={res.data !== undefined && !forbidden ? res.error : undefined} />
        {res.error !== undefined && (res.data === undefined || forbidden) ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<ServiceRow>
            data-testid="svc-table"
            rowKey={(r) => `${r.groupName}@@${r.name}`}
            columns={columns}
            dataSource={res.data?.serviceList}
            loading={res.loading}
            locale={{
              emptyText: res.loading ? (
                ' '
              ) : filtered ? (
                <EmptyState
                  text={t('svc.emptyFiltered')}
                  action={
                    <Button
                      onClick={() => {
                        setName('');
                        setGroup('');
                        setHideEmpty(false);
                        setUnhealthyOnly(false);
                        save(KEYS.hideEmpty, 'false');
                      }}
                    >
                      {t('svc.clearFilters')}
                    </Button>
                  }
                />
              ) : (
                <EmptyState
                  text={t('svc.empty')}
                  action={
                    <Button type="primary" icon={<PlusOutlined />} onClick={() => create.show(true)}>
                      {t('svc.create')}
                    </Button>
                  }
                />
              ),
            }}
            pagination={pagination(count, { pageSizeOptions: [10, 20, 50, 100], hideOnSinglePage: false })}
          />
        )}
      </Card>

      <FormModal<ServiceValues>
        open={create.open}
        title={t('svc.create')}
        testid="svc-form"
        form={form}
        width={620}
        initialValues={serviceInitial()}
        okText={t('common.create')}
        onCancel={create.hide}
        onSubmit={submitCreate}
      >
        <ServiceFormFields creating />
      </FormModal>

      <ConfirmDialog
        open={del.open}
        title={t('svc.deleteTitle', { name: del.target?.name ?? '' })}
        body={t('svc.deleteBody', { name: del.target?.name ?? '', group: del.target?.groupName ?? '' })}
        onCancel={del.hide}
        onConfirm={submitDelete}
      />
    </div>
  );
}
