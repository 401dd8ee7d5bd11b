import { App, Alert, Button, Card, Form, Input, Modal, Select, Space, Table, Typography } from 'antd';
import { DeleteOutlined, PlusOutlined, ReloadOutlined } from '@ant-design/icons';
import { useState } from 'react';
import { call, type UsersPage } from '../api';
import { useT } from '../i18n';
import { useDialog, useResource } from '../hooks';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { EmptyState, LoadError, PageTitle, RefreshError } from '../components/bits';
import { dateTime } from '../format';

interface TokenRow {
  id: string;
  user: string;
  description: string;
  createdMs: number;
}

interface CreateValues {
  user: string;
  description?: string;
}

/** Long-lived API tokens: created for a user, shown once, listed, revoked. */
export function TokensPage() {
  const t = useT();
  const { message } = App.useApp();
  const res = useResource(() => call<{ tokens: TokenRow[] }>('GET', '/api/v1/tokens'), []);
  const users = useResource(() => call<UsersPage>('GET', '/nacos/v1/auth/users', { pageNo: 1, pageSize: 500 }), []);
  const [form] = Form.useForm<CreateValues>();
  const create = useDialog<true>();
  const revoke = useDialog<TokenRow>();
  // The token just created: shown this once.
  const [created, setCreated] = useState<{ id: string; token: string; user: string } | null>(null);

  const submitCreate = async (v: CreateValues) => {
    const answer = await call<{ id: string; token: string }>('POST', '/api/v1/tokens', undefined, {
      json: { user: v.user, description: (v.description ?? '').trim() },
    });
    create.hide();
    form.resetFields();
    setCreated({ ...answer, user: v.user });
    await res.reload({ silent: true });
  };

  const submitRevoke = async () => {
    const row = revoke.target;
    if (!row) return;
    await call('DELETE', '/api/v1/tokens', { id: row.id });
    message.success(t('tokens.revoked', { id: row.id }));
    revoke.hide();
    await res.reload({ silent: true });
  };

  const columns = [
    {
      title: t('tokens.id'),
      dataIndex: 'id',
      key: 'id',
      render: (id: string) => <span className="mono">{id}</span>,
    },
    { title: t('tokens.user'), dataIndex: 'user', key: 'user' },
    {
      title: t('tokens.description'),
      dataIndex: 'description',
      key: 'description',
      render: (d: string) => d || <Typography.Text type="secondary">—</Typography.Text>,
    },
    {
      title: t('tokens.created'),
      dataIndex: 'createdMs',
      key: 'created',
      render: (ms: number) => dateTime(new Date(ms)),
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 140,
      render: (_: unknown, row: TokenRow) => (
        <Button type="link" size="small" danger icon={<DeleteOutlined />} data-testid={`token-revoke-${row.id}`} onClick={() => revoke.show(row)}>
          {t('tokens.revoke')}
        </Button>
      ),
    },
  ];

  return (
    <div className="page">
      <PageTitle
        title={t('tokens.title')}
        subtitle={t('tokens.subtitle')}
        extra={
          <Space wrap>
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="tokens-refresh">
              {t('common.refresh')}
            </Button>
            <Button type="primary" icon={<PlusOutlined />} onClick={() => create.show(true)} data-testid="token-create">
              {t('tokens.create')}
            </Button>
          </Space>
        }
      />
      <Card className="table-card">
        <RefreshError error={res.data !== undefined ? res.error : undefined} />
        {res.data === undefined && res.error !== undefined ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<TokenRow>
            data-testid="tokens-table"
            rowKey="id"
            columns={columns}
            dataSource={res.data?.tokens}
            loading={res.loading}
            locale={{ emptyText: res.loading ? ' ' : <EmptyState text={t('tokens.empty')} /> }}
            pagination={false}
          />
        )}
      </Card>

      <FormModal<CreateValues>
        open={create.open}
        title={t('tokens.create')}
        testid="token-form"
        form={form}
        okText={t('common.create')}
        onCancel={create.hide}
        onSubmit={submitCreate}
      >
        <Form.Item name="user" label={t('tokens.user')} rules={[{ required: true, message: t('tokens.userRequired') }]}>
          <Select
            showSearch
            data-testid="token-form-user"
            options={(users.data?.pageItems ?? []).map((u) => ({
              value: u.username,
              label: <span data-testid={`token-form-user-option-${u.username}`}>{u.username}</span>,
            }))}
          />
        </Form.Item>
        <Form.Item name="description" label={t('tokens.description')} rules={[{ max: 256 }]}>
          <Input autoComplete="off" data-testid="token-form-description" />
        </Form.Item>
      </FormModal>

      <Modal
        open={created !== null}
        title={t('tokens.createdTitle', { user: created?.user ?? '' })}
        onCancel={() => setCreated(null)}
        footer={
          <Button type="primary" onClick={() => setCreated(null)} data-testid="token-created-close">
            {t('tokens.stored')}
          </Button>
        }
      >
        <Alert type="warning" showIcon message={t('tokens.onceOnly')} style={{ marginBottom: 12 }} />
        <Typography.Paragraph copyable className="mono" data-testid="token-secret" style={{ wordBreak: 'break-all' }}>
          {created?.token}
        </Typography.Paragraph>
      </Modal>

      <ConfirmDialog
        open={revoke.open}
        title={t('tokens.revokeTitle', { id: revoke.target?.id ?? '' })}
        body={t('tokens.revokeBody', { user: revoke.target?.user ?? '' })}
        onCancel={revoke.hide}
        onConfirm={submitRevoke}
      />
    </div>
  );
}
