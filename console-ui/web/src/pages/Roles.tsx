// Roles (admins): which user holds which role. Binding or unbinding a role ends the
// user's sessions (the server revokes their tokens); a role's permissions are on the
// permissions page.
import { App, Button, Card, Form, Input, Space, Table, Tag, Typography } from 'antd';
import { DisconnectOutlined, LockOutlined, PlusOutlined, ReloadOutlined, SearchOutlined, UserOutlined } from '@ant-design/icons';
import { useEffect, useState } from 'react';
import { call, type AuthPage, type RoleBinding } from '../api';
import { useT, type Translate } from '../i18n';
import { useDebounced, useDialog, usePaging, useResource } from '../hooks';
import { useLive } from '../live';
import { href, navigate } from '../router';
import { ROLE_ADMIN, ROLE_NAME } from '../grants';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { EmptyState, LiveBadge, LoadError, PageTitle, RefreshError } from '../components/bits';
import { RoleInput, UserPicker } from '../components/Pickers';

interface BindValues {
  role: string;
  username: string;
}

const ROLES = '/nacos/v1/auth/roles';

/** A role name: required, and as the server accepts it (surrounding spaces aside). */
export function roleRules(t: Translate) {
  return [
    { required: true, whitespace: true, message: t('roles.roleRequired') },
    {
      validator: async (_: unknown, v?: string) => {
        if (v && v.trim() && !ROLE_NAME.test(v.trim())) throw new Error(t('roles.roleInvalid'));
      },
    },
  ];
}

/** The table row key of a binding (and the test's handle on it). */
export const bindingKey = (b: RoleBinding) => `${b.role}/${b.username}`;

export function RolesPage() {
  const t = useT();
  const { message } = App.useApp();
  const [roleText, setRoleText] = useState('');
  const [userText, setUserText] = useState('');
  const qRole = useDebounced(roleText.trim(), 250);
  const qUser = useDebounced(userText.trim(), 250);
  const { page, pageSize, setPage, pagination } = usePaging();
  const res = useResource(
    () =>
      call<AuthPage<RoleBinding>>('GET', ROLES, {
        pageNo: page,
        pageSize,
        role: qRole || undefined,
        username: qUser || undefined,
        search: 'blur',
      }),
    [page, pageSize, qRole, qUser],
  );
  useEffect(() => setPage(1), [qRole, qUser]);
  // Roles bound or unbound by another admin or through the API.
  const live = useLive({ user: { refresh: () => res.reload({ silent: true }) } });

  const [form] = Form.useForm<BindValues>();
  const bind = useDialog<true>();
  const unbind = useDialog<RoleBinding>();

  const submitBind = async (v: BindValues) => {
    const role = v.role.trim();
    await call('POST', ROLES, { role, username: v.username });
    message.success(t('roles.bound', { role, name: v.username }));
    bind.hide();
    await res.reload({ silent: true });
  };

  const submitUnbind = async () => {
    const b = unbind.target;
    if (!b) return;
    await call('DELETE', ROLES, { role: b.role, username: b.username });
    message.success(t('roles.unbound', { role: b.role, name: b.username }));
    unbind.hide();
    await res.reload({ silent: true });
  };

  const columns = [
    {
      title: t('roles.role'),
      dataIndex: 'role',
      key: 'role',
      render: (role: string) =>
        role === ROLE_ADMIN ? (
          <Space size={6}>
            <Typography.Text strong className="mono">
              {role}
            </Typography.Text>
            <Tag color="gold" bordered={false}>
              {t('users.admin')}
            </Tag>
          </Space>
        ) : (
          <Typography.Text strong className="mono">
            {role}
          </Typography.Text>
        ),
    },
    {
      title: t('roles.user'),
      dataIndex: 'username',
      key: 'username',
      render: (n: string) => (
        <Space size={8}>
          <UserOutlined />
          <span>{n}</span>
        </Space>
      ),
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 260,
      render: (_: unknown, b: RoleBinding) => (
        <Space size={0}>
          {b.role !== ROLE_ADMIN && (
            <Button
              type="link"
              size="small"
              icon={<LockOutlined />}
              data-testid={`role-permissions-${bindingKey(b)}`}
              onClick={() => navigate(href('/permissions', { role: b.role }))}
            >
              {t('roles.permissions')}
            </Button>
          )}
          <Button
            type="link"
            size="small"
            danger
            icon={<DisconnectOutlined />}
            data-testid={`role-unbind-${bindingKey(b)}`}
            onClick={() => unbind.show(b)}
          >
            {t('roles.unbind')}
          </Button>
        </Space>
      ),
    },
  ];

  const filtered = qRole !== '' || qUser !== '';
  const target = unbind.target;
  return (
    <div className="page">
      <PageTitle
        title={t('roles.title')}
        subtitle={t('roles.subtitle')}
        extra={
          <>
            <LiveBadge mode={live} />
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="roles-refresh">
              {t('common.refresh')}
            </Button>
            <Button type="primary" icon={<PlusOutlined />} onClick={() => bind.show(true)} data-testid="role-create">
              {t('roles.bind')}
            </Button>
          </>
        }
      />
      <Card className="table-card">
        <div className="filters">
          <Input
            allowClear
            prefix={<SearchOutlined />}
            placeholder={t('roles.searchRole')}
            value={roleText}
            onChange={(e) => setRoleText(e.target.value)}
            style={{ width: 240 }}
            data-testid="roles-filter-role"
          />
          <Input
            allowClear
            prefix={<UserOutlined />}
            placeholder={t('roles.searchUser')}
            value={userText}
            onChange={(e) => setUserText(e.target.value)}
            style={{ width: 200 }}
            data-testid="roles-filter-user"
          />
        </div>
        <RefreshError error={res.data !== undefined ? res.error : undefined} />
        {res.data === undefined && res.error !== undefined ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<RoleBinding>
            data-testid="roles-table"
            rowKey={bindingKey}
            columns={columns}
            dataSource={res.data?.pageItems}
            loading={res.loading}
            locale={{
              emptyText: res.loading ? ' ' : <EmptyState text={t(filtered ? 'roles.emptyFiltered' : 'roles.empty')} />,
            }}
            pagination={pagination(res.data?.totalCount ?? 0)}
          />
        )}
      </Card>

      <FormModal<BindValues>
        open={bind.open}
        title={t('roles.bind')}
        testid="role-form"
        form={form}
        okText={t('roles.bindOk')}
        onCancel={bind.hide}
        onSubmit={submitBind}
      >
        <Form.Item
          name="role"
          label={t('roles.role')}
          extra={t('roles.roleHint')}
          rules={roleRules(t)}
        >
          <RoleInput testid="role-form-role" placeholder="dev-rw" />
        </Form.Item>
        <Form.Item name="username" label={t('roles.user')} rules={[{ required: true, message: t('roles.userRequired') }]}>
          <UserPicker testid="role-form-user" placeholder={t('roles.pickUser')} />
        </Form.Item>
        <Typography.Paragraph type="secondary" style={{ marginBottom: 0 }}>
          {t('roles.bindNote')}
        </Typography.Paragraph>
      </FormModal>

      <ConfirmDialog
        open={unbind.open}
        title={t('roles.unbindTitle', { role: target?.role ?? '', name: target?.username ?? '' })}
        body={t(target?.role === ROLE_ADMIN ? 'roles.unbindAdminBody' : 'roles.unbindBody', {
          role: target?.role ?? '',
          name: target?.username ?? '',
        })}
        okText={t('roles.unbind')}
        onCancel={unbind.hide}
        onConfirm={submitUnbind}
      />
    </div>
  );
}
