import { App, Button, Card, Form, Input, Space, Table, Tag, Typography } from 'antd';
import { DeleteOutlined, KeyOutlined, PlusOutlined, ReloadOutlined, UserOutlined } from '@ant-design/icons';
import { call, type UserRow, type UsersPage as UsersAnswer } from '../api';
import { useAuth } from '../auth';
import { useT, type Translate } from '../i18n';
import { useDialog, usePaging, useResource } from '../hooks';
import { useLive } from '../live';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { EmptyState, LiveBadge, LoadError, PageTitle, RefreshError, WhyDisabled } from '../components/bits';

interface CreateValues {
  username: string;
  password: string;
  confirm: string;
}

interface PasswordValues {
  password: string;
  confirm: string;
}

function passwordRules(t: Translate) {
  return [
    { required: true, message: t('users.passwordShort') },
    { min: 8, message: t('users.passwordShort') },
    { max: 256, message: t('users.passwordRule') },
  ];
}

function confirmRules(t: Translate) {
  return [
    { required: true, message: t('users.passwordMismatch') },
    ({ getFieldValue }: { getFieldValue(n: string): unknown }) => ({
      validator: async (_: unknown, v: string) => {
        if (v && v !== getFieldValue('password')) throw new Error(t('users.passwordMismatch'));
      },
    }),
  ];
}

export function UsersPage() {
  const t = useT();
  const { message } = App.useApp();
  const { session } = useAuth();
  const { page, pageSize, pagination } = usePaging();
  const res = useResource(() => call<UsersAnswer>('GET', '/nacos/v1/auth/users', { pageNo: page, pageSize }), [page, pageSize]);
  // Users made or deleted by another admin or through the API.
  const live = useLive({ user: { refresh: () => res.reload({ silent: true }) } });

  const [createForm] = Form.useForm<CreateValues>();
  const create = useDialog<true>();
  const pw = useDialog<UserRow>();
  const del = useDialog<UserRow>();

  const submitCreate = async (v: CreateValues) => {
    const username = v.username.trim();
    await call('POST', '/nacos/v1/auth/users', { username, password: v.password });
    message.success(t('users.created', { name: username }));
    create.hide();
    await res.reload({ silent: true });
  };

  const submitDelete = async () => {
    const u = del.target;
    if (!u) return;
    await call('DELETE', '/nacos/v1/auth/users', { username: u.username });
    message.success(t('users.deleted', { name: u.username }));
    del.hide();
    await res.reload({ silent: true });
  };

  const columns = [
    {
      title: t('users.username'),
      dataIndex: 'username',
      key: 'username',
      render: (n: string) => (
        <Space size={8}>
          <UserOutlined />
          <Typography.Text strong>{n}</Typography.Text>
          {n === session?.username && (
            <Tag bordered={false} color="blue">
              {t('users.you')}
            </Tag>
          )}
        </Space>
      ),
    },
    {
      title: t('users.role'),
      dataIndex: 'admin',
      key: 'role',
      render: (a?: boolean) => (a ? <Tag color="gold">{t('users.admin')}</Tag> : <Tag>{t('users.user')}</Tag>),
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 280,
      render: (_: unknown, u: UserRow) => (
        <Space size={0}>
          <Button type="link" size="small" icon={<KeyOutlined />} data-testid={`user-password-${u.username}`} onClick={() => pw.show(u)}>
            {t('users.changePassword')}
          </Button>
          <DeleteUserButton user={u} self={u.username === session?.username} onClick={() => del.show(u)} />
        </Space>
      ),
    },
  ];

  return (
    <div className="page">
      <PageTitle
        title={t('users.title')}
        subtitle={t('users.subtitle')}
        extra={
          <>
            <LiveBadge mode={live} />
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="users-refresh">
              {t('common.refresh')}
            </Button>
            <Button type="primary" icon={<PlusOutlined />} onClick={() => create.show(true)} data-testid="user-create">
              {t('users.create')}
            </Button>
          </>
        }
      />
      <Card className="table-card">
        <RefreshError error={res.data !== undefined ? res.error : undefined} />
        {res.data === undefined && res.error !== undefined ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<UserRow>
            data-testid="users-table"
            rowKey="username"
            columns={columns}
            dataSource={res.data?.pageItems}
            loading={res.loading}
            locale={{ emptyText: res.loading ? ' ' : <EmptyState text={t('users.empty')} /> }}
            pagination={pagination(res.data?.totalCount ?? 0)}
          />
        )}
      </Card>

      <FormModal<CreateValues>
        open={create.open}
        title={t('users.create')}
        testid="user-form"
        form={createForm}
        okText={t('common.create')}
        onCancel={create.hide}
        onSubmit={submitCreate}
      >
        <Form.Item
          name="username"
          label={t('users.username')}
          rules={[{ required: true, whitespace: true, message: t('users.usernameRequired') }]}
        >
          <Input autoFocus autoComplete="off" data-testid="user-form-username" />
        </Form.Item>
        <Form.Item name="password" label={t('users.password')} extra={t('users.passwordRule')} rules={passwordRules(t)}>
          <Input.Password autoComplete="new-password" data-testid="user-form-password" />
        </Form.Item>
        <Form.Item name="confirm" label={t('users.confirmPassword')} dependencies={['password']} rules={confirmRules(t)}>
          <Input.Password autoComplete="new-password" data-testid="user-form-confirm" />
        </Form.Item>
      </FormModal>

      <PasswordDialog open={pw.open} username={pw.target?.username ?? ''} onClose={pw.hide} />

      <ConfirmDialog
        open={del.open}
        title={t('users.deleteTitle', { name: del.target?.username ?? '' })}
        body={t('users.deleteBody', { name: del.target?.username ?? '' })}
        onCancel={del.hide}
        onConfirm={submitDelete}
      />
    </div>
  );
}

/**
 * Delete, or why not: the server refuses to delete an admin (ROLE_ADMIN has to be taken
 * from them first, on the roles page, and the last admin keeps it) and the user logged in.
 */
function DeleteUserButton({ user, self, onClick }: { user: UserRow; self: boolean; onClick(): void }) {
  const t = useT();
  const why = self ? t('users.cannotDeleteSelf') : user.admin ? t('users.cannotDeleteAdmin') : null;
  const button = (
    <Button
      type="link"
      size="small"
      danger
      icon={<DeleteOutlined />}
      disabled={why !== null}
      data-testid={`user-delete-${user.username}`}
      data-disabled-reason={why ?? undefined}
      onClick={onClick}
    >
      {t('common.delete')}
    </Button>
  );
  return (
    <WhyDisabled why={why} testid={`user-delete-why-${user.username}`}>
      {button}
    </WhyDisabled>
  );
}

/** Change a user's password: admins for anyone, every user for themselves. */
export function PasswordDialog({ open, username, onClose }: { open: boolean; username: string; onClose(): void }) {
  const t = useT();
  const { message } = App.useApp();
  const [form] = Form.useForm<PasswordValues>();
  const submit = async (v: PasswordValues) => {
    await call('PUT', '/nacos/v1/auth/users', { username, newPassword: v.password });
    message.success(t('users.passwordChanged', { name: username }));
    onClose();
  };
  return (
    <FormModal<PasswordValues>
      open={open}
      title={t('users.changePasswordFor', { name: username })}
      testid="password-form"
      form={form}
      onCancel={onClose}
      onSubmit={submit}
    >
      <Form.Item name="password" label={t('users.newPassword')} extra={t('users.passwordRule')} rules={passwordRules(t)}>
        <Input.Password autoFocus autoComplete="new-password" data-testid="password-form-password" />
      </Form.Item>
      <Form.Item name="confirm" label={t('users.confirmPassword')} dependencies={['password']} rules={confirmRules(t)}>
        <Input.Password autoComplete="new-password" data-testid="password-form-confirm" />
      </Form.Item>
    </FormModal>
  );
}
