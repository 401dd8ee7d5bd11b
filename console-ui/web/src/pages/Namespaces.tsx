import { App, Button, Card, Form, Input, Space, Table, Tag, Typography } from 'antd';
import { DeleteOutlined, EditOutlined, PlusOutlined, ReloadOutlined, UnorderedListOutlined } from '@ant-design/icons';
import { call, type Namespace } from '../api';
import { useAuth } from '../auth';
import { useT } from '../i18n';
import { useDialog, useResource } from '../hooks';
import { useLive } from '../live';
import { href, navigate } from '../router';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { EmptyState, LiveBadge, LoadError, PageTitle, RefreshError, WhyDisabled } from '../components/bits';
import { num } from '../format';

interface NsValues {
  customNamespaceId?: string;
  namespaceName: string;
  namespaceDesc?: string;
}

export async function fetchNamespaces(): Promise<Namespace[]> {
  const r = await call<{ data?: Namespace[] }>('GET', '/nacos/v1/console/namespaces');
  return r?.data ?? [];
}

export function NamespacesPage() {
  const t = useT();
  const { message } = App.useApp();
  const { session } = useAuth();
  const isAdmin = !!session?.globalAdmin;
  const res = useResource(fetchNamespaces, []);
  // Namespaces made, renamed or deleted elsewhere; service events change the counts
  // (and bring namespaces that exist only because services were registered in them).
  const refresh = () => res.reload({ silent: true });
  const live = useLive({ namespace: { refresh }, service: { refresh } });
  const [form] = Form.useForm<NsValues>();
  const edit = useDialog<Namespace | 'new'>();
  const del = useDialog<Namespace>();
  const editing = edit.target;
  const deleting = del.target;

  const openServices = (id: string) => navigate(href('/services', { namespaceId: id }));

  const save = async (v: NsValues) => {
    const name = v.namespaceName.trim();
    if (editing === 'new') {
      await call('POST', '/nacos/v1/console/namespaces', {
        customNamespaceId: v.customNamespaceId?.trim() || undefined,
        namespaceName: name,
        namespaceDesc: v.namespaceDesc ?? '',
      });
      message.success(t('ns.created', { name }));
    } else if (editing) {
      await call('PUT', '/nacos/v1/console/namespaces', {
        namespace: editing.namespace,
        namespaceShowName: name,
        namespaceDesc: v.namespaceDesc ?? '',
      });
      message.success(t('ns.saved', { name }));
    }
    edit.hide();
    await res.reload({ silent: true });
  };

  const remove = async () => {
    if (!deleting) return;
    await call('DELETE', '/nacos/v1/console/namespaces', { namespaceId: deleting.namespace });
    message.success(t('ns.deleted', { name: deleting.namespaceShowName }));
    del.hide();
    await res.reload({ silent: true });
  };

  const columns = [
    {
      title: t('ns.name'),
      key: 'name',
      render: (_: unknown, r: Namespace) => (
        <Space size={6}>
          <a onClick={() => openServices(r.namespace)} className="strong-link">
            {r.namespaceShowName}
          </a>
          {r.type === 0 && (
            <Tag color="default" bordered={false}>
              {t('ns.default')}
            </Tag>
          )}
        </Space>
      ),
    },
    {
      title: t('ns.id'),
      dataIndex: 'namespace',
      key: 'id',
      render: (id: string) => (
        <Typography.Text code copyable={{ text: id }} className="mono ns-id" ellipsis={{ tooltip: id }}>
          {id}
        </Typography.Text>
      ),
    },
    {
      title: t('ns.desc'),
      dataIndex: 'namespaceDesc',
      key: 'desc',
      ellipsis: true,
      render: (d: string | undefined) => d || <Typography.Text type="secondary">—</Typography.Text>,
    },
    {
      title: t('ns.services'),
      dataIndex: 'serviceCount',
      key: 'services',
      align: 'right' as const,
      width: 110,
      render: (n: number | undefined, r: Namespace) => (
        <a
          href={'#' + href('/services', { namespaceId: r.namespace })}
          data-testid={`ns-service-count-${r.namespace}`}
          onClick={(e) => {
            e.preventDefault();
            openServices(r.namespace);
          }}
        >
          {num(n ?? 0)}
        </a>
      ),
    },
    {
      title: t('ns.instances'),
      dataIndex: 'instanceCount',
      key: 'instances',
      align: 'right' as const,
      width: 110,
      render: (n: number | undefined, r: Namespace) => (
        <span data-testid={`ns-instance-count-${r.namespace}`}>{num(n ?? 0)}</span>
      ),
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 300,
      render: (_: unknown, r: Namespace) => {
        const locked = r.type === 0;
        const lockTip = locked ? t('ns.publicLocked') : undefined;
        return (
          <Space size={0}>
            <Button
              type="link"
              size="small"
              icon={<UnorderedListOutlined />}
              data-testid={`ns-services-${r.namespace}`}
              onClick={() => openServices(r.namespace)}
            >
              {t('ns.viewServices')}
            </Button>
            {isAdmin && (
              <WhyDisabled why={lockTip} testid={`ns-edit-why-${r.namespace}`}>
                <Button
                  type="link"
                  size="small"
                  icon={<EditOutlined />}
                  disabled={locked}
                  data-testid={`ns-edit-${r.namespace}`}
                  onClick={() => edit.show(r)}
                >
                  {t('common.edit')}
                </Button>
              </WhyDisabled>
            )}
            {isAdmin && (
              <WhyDisabled why={lockTip} testid={`ns-delete-why-${r.namespace}`}>
                <Button
                  type="link"
                  size="small"
                  danger
                  icon={<DeleteOutlined />}
                  disabled={locked}
                  data-testid={`ns-delete-${r.namespace}`}
                  onClick={() => del.show(r)}
                >
                  {t('common.delete')}
                </Button>
              </WhyDisabled>
            )}
          </Space>
        );
      },
    },
  ];

  return (
    <div className="page">
      <PageTitle
        title={t('ns.title')}
        subtitle={t('ns.subtitle')}
        extra={
          <>
            <LiveBadge mode={live} />
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="ns-refresh">
              {t('common.refresh')}
            </Button>
            {isAdmin && (
              <Button
                type="primary"
                icon={<PlusOutlined />}
                data-testid="ns-create"
                onClick={() => edit.show('new')}
              >
                {t('ns.create')}
              </Button>
            )}
          </>
        }
      />
      {res.error !== undefined && res.data === undefined ? (
        <Card>
          <LoadError error={res.error} onRetry={() => res.reload()} />
        </Card>
      ) : (
        <Card className="table-card">
          <RefreshError error={res.data !== undefined ? res.error : undefined} />
          <Table<Namespace>
            data-testid="ns-table"
            rowKey="namespace"
            columns={columns}
            dataSource={res.data}
            loading={res.loading}
            pagination={false}
            locale={{ emptyText: res.loading ? ' ' : <EmptyState text={t('ns.empty')} /> }}
          />
        </Card>
      )}

      <FormModal<NsValues>
        open={edit.open}
        title={editing === 'new' ? t('ns.create') : t('ns.edit')}
        testid="ns-form"
        form={form}
        initialValues={
          editing && editing !== 'new'
            ? { namespaceName: editing.namespaceShowName, namespaceDesc: editing.namespaceDesc ?? '' }
            : {}
        }
        okText={editing === 'new' ? t('common.create') : t('common.save')}
        onCancel={edit.hide}
        onSubmit={save}
      >
        {editing === 'new' ? (
          <Form.Item
            name="customNamespaceId"
            label={t('ns.customId')}
            extra={t('ns.customIdHint')}
            rules={[{ pattern: /^[A-Za-z0-9_-]{1,128}$/, message: t('ns.customIdInvalid') }]}
          >
            <Input data-testid="ns-form-id" autoFocus className="mono" />
          </Form.Item>
        ) : (
          editing && (
            <Form.Item label={t('ns.id')}>
              <Typography.Text code className="mono">
                {editing.namespace}
              </Typography.Text>
            </Form.Item>
          )
        )}
        <Form.Item
          name="namespaceName"
          label={t('ns.name')}
          rules={[{ required: true, whitespace: true, message: t('ns.nameRequired') }]}
        >
          <Input data-testid="ns-form-name" maxLength={256} />
        </Form.Item>
        <Form.Item name="namespaceDesc" label={t('ns.desc')}>
          <Input.TextArea data-testid="ns-form-desc" autoSize={{ minRows: 2, maxRows: 5 }} maxLength={1024} />
        </Form.Item>
      </FormModal>

      <ConfirmDialog
        open={del.open}
        title={t('ns.deleteTitle', { name: deleting?.namespaceShowName ?? '' })}
        body={t('ns.deleteBody', { name: deleting?.namespaceShowName ?? '', id: deleting?.namespace ?? '' })}
        onCancel={del.hide}
        onConfirm={remove}
      />
    </div>
  );
}
