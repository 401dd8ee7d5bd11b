// Permissions (admins): what each role may do. The simple form grants a role a whole
// namespace, read-only, read-write or write-only (`namespaceId:*:*`, as Nacos' console
// does); the advanced one takes any resource pattern. A grant or a revocation counts
// for the next request of every holder, on every node.
import { App, Button, Card, Form, Input, Radio, Select, Space, Table, Tag, Typography, type SelectProps } from 'antd';
import { DeleteOutlined, PlusOutlined, ReloadOutlined, SearchOutlined } from '@ant-design/icons';
import { useEffect, useState } from 'react';
import { call, type Action, type AuthPage, type Permission } from '../api';
import { useT, type Translate } from '../i18n';
import { useDebounced, useDialog, usePaging, useResource } from '../hooks';
import { useLive } from '../live';
import type { Route } from '../router';
import { ACTIONS, namespaceResource, scopeOf } from '../grants';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { EmptyState, LiveBadge, LoadError, PageTitle, RefreshError } from '../components/bits';
import { RoleInput, namespaceOptions } from '../components/Pickers';
import { fetchNamespaces } from './Namespaces';
import { roleRules } from './Roles';

interface GrantValues {
  role: string;
  scope: 'namespace' | 'pattern';
  namespace?: string;
  resource?: string;
  action: Action;
}

const PERMISSIONS = '/nacos/v1/auth/permissions';

/**
 * A Select for a required Form.Item. The item marks its field `aria-required`, and antd's
 * Select puts that on its outer div, where ARIA does not allow it (axe: aria-allowed-attr);
 * the label's asterisk and the rule's message say that it is required.
 */
function RequiredSelect(props: SelectProps & { 'aria-required'?: unknown }) {
  const { 'aria-required': _required, ...rest } = props;
  return <Select {...rest} />;
}

/** The row key of a permission (and the test's handle on it). */
export const permissionKey = (p: Permission) => `${p.role}|${p.resource}|${p.action}`;

/** The resource a filled-in grant form names. */
function resourceOf(v: Partial<GrantValues>): string {
  if (v.scope === 'pattern') return (v.resource ?? '').trim();
  return v.namespace ? namespaceResource(v.namespace) : '';
}

/** What a resource pattern covers, in words. */
export function scopeText(resource: string, t: Translate): string {
  const scope = scopeOf(resource);
  if (scope.kind === 'everything') return t('perm.scopeEverything');
  if (scope.kind === 'namespace') return t('perm.scopeNamespace', { id: scope.namespaceId });
  return t('perm.scopePattern');
}

export function ActionTag({ action }: { action: Action }) {
  const t = useT();
  const [color, label] = ACTIONS[action] ?? ['default', undefined];
  return (
    <Tag color={color} data-testid="perm-action" data-action={action}>
      {label ? t(label) : action}
    </Tag>
  );
}

export function PermissionsPage({ route }: { route: Route }) {
  const t = useT();
  const { message } = App.useApp();
  // `?role=` (the roles page's link) sets the filter
  const linkedRole = route.query.get('role') ?? '';
  const [roleText, setRoleText] = useState(linkedRole);
  useEffect(() => setRoleText(linkedRole), [linkedRole]);
  const qRole = useDebounced(roleText.trim(), 250);
  const { page, pageSize, setPage, pagination } = usePaging();
  const res = useResource(
    () =>
      call<AuthPage<Permission>>('GET', PERMISSIONS, {
        pageNo: page,
        pageSize,
        role: qRole || undefined,
        search: 'blur',
      }),
    [page, pageSize, qRole],
  );
  useEffect(() => setPage(1), [qRole]);
  // Grants made or taken back by another admin or through the API.
  const live = useLive({ user: { refresh: () => res.reload({ silent: true }) } });

  const [form] = Form.useForm<GrantValues>();
  const grant = useDialog<true>();
  const revoke = useDialog<Permission>();

  const submitGrant = async (v: GrantValues) => {
    const role = v.role.trim();
    const resource = resourceOf(v);
    await call('POST', PERMISSIONS, { role, resource, action: v.action });
    message.success(t('perm.granted', { role, resource, action: v.action }));
    grant.hide();
    await res.reload({ silent: true });
  };

  const submitRevoke = async () => {
    const p = revoke.target;
    if (!p) return;
    await call('DELETE', PERMISSIONS, { role: p.role, resource: p.resource, action: p.action });
    message.success(t('perm.revoked', { role: p.role, resource: p.resource, action: p.action }));
    revoke.hide();
    await res.reload({ silent: true });
  };

  const columns = [
    {
      title: t('roles.role'),
      dataIndex: 'role',
      key: 'role',
      render: (role: string) => (
        <Typography.Text strong className="mono">
          {role}
        </Typography.Text>
      ),
    },
    {
      title: t('perm.resource'),
      dataIndex: 'resource',
      key: 'resource',
      render: (resource: string) => (
        <div className="cell-lines">
          <Typography.Text code className="mono">
            {resource}
          </Typography.Text>
          <Typography.Text type="secondary" className="when-abs">
            {scopeText(resource, t)}
          </Typography.Text>
        </div>
      ),
    },
    {
      title: t('perm.action'),
      dataIndex: 'action',
      key: 'action',
      width: 160,
      render: (a: Action) => <ActionTag action={a} />,
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 140,
      render: (_: unknown, p: Permission) => (
        <Button
          type="link"
          size="small"
          danger
          icon={<DeleteOutlined />}
          data-testid={`perm-revoke-${permissionKey(p)}`}
          onClick={() => revoke.show(p)}
        >
          {t('perm.revoke')}
        </Button>
      ),
    },
  ];

  const target = revoke.target;
  return (
    <div className="page">
      <PageTitle
        title={t('perm.title')}
        subtitle={t('perm.subtitle')}
        extra={
          <>
            <LiveBadge mode={live} />
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="perm-refresh">
              {t('common.refresh')}
            </Button>
            <Button type="primary" icon={<PlusOutlined />} onClick={() => grant.show(true)} data-testid="perm-create">
              {t('perm.grant')}
            </Button>
          </>
        }
      />
      <Card className="table-card">
        <div className="filters">
          <Input
            allowClear
            prefix={<SearchOutlined />}
            placeholder={t('perm.searchRole')}
            value={roleText}
            onChange={(e) => setRoleText(e.target.value)}
            style={{ width: 260 }}
            data-testid="perm-filter-role"
          />
        </div>
        <RefreshError error={res.data !== undefined ? res.error : undefined} />
        {res.data === undefined && res.error !== undefined ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<Permission>
            data-testid="perm-table"
            rowKey={permissionKey}
            columns={columns}
            dataSource={res.data?.pageItems}
            loading={res.loading}
            locale={{
              emptyText: res.loading ? ' ' : <EmptyState text={t(qRole ? 'perm.emptyFiltered' : 'perm.empty')} />,
            }}
            pagination={pagination(res.data?.totalCount ?? 0)}
          />
        )}
      </Card>

      <FormModal<GrantValues>
        open={grant.open}
        title={t('perm.grant')}
        testid="perm-form"
        form={form}
        width={600}
        initialValues={{ role: qRole, scope: 'namespace', action: 'r' }}
        okText={t('perm.grantOk')}
        onCancel={grant.hide}
        onSubmit={submitGrant}
      >
        <GrantFields />
      </FormModal>

      <ConfirmDialog
        open={revoke.open}
        title={t('perm.revokeTitle', { role: target?.role ?? '' })}
        body={
          target && (
            <span>
              {t('perm.revokeBody', { role: target.role })}{' '}
              <Typography.Text code className="mono">
                {target.resource}
              </Typography.Text>{' '}
              <ActionTag action={target.action} />
            </span>
          )
        }
        okText={t('perm.revoke')}
        onCancel={revoke.hide}
        onConfirm={submitRevoke}
      />
    </div>
  );
}

function GrantFields() {
  const t = useT();
  const namespaces = useResource(fetchNamespaces, []);
  return (
    <>
      <Form.Item name="role" label={t('roles.role')} extra={t('perm.roleHint')} rules={roleRules(t)}>
        <RoleInput testid="perm-form-role" placeholder="dev-rw" />
      </Form.Item>
      <Form.Item name="scope" label={t('perm.scope')}>
        <Radio.Group
          optionType="button"
          options={[
            { value: 'namespace', label: <span data-testid="perm-form-scope-namespace">{t('perm.scopeNamespaceLabel')}</span> },
            { value: 'pattern', label: <span data-testid="perm-form-scope-pattern">{t('perm.scopePatternLabel')}</span> },
          ]}
        />
      </Form.Item>
      <Form.Item noStyle shouldUpdate={(a, b) => a.scope !== b.scope}>
        {({ getFieldValue }) =>
          getFieldValue('scope') === 'pattern' ? (
            <Form.Item
              name="resource"
              label={t('perm.resource')}
              extra={t('perm.resourceHint')}
              rules={[{ required: true, whitespace: true, message: t('perm.resourceRequired') }]}
            >
              <Input
                className="mono"
                autoComplete="off"
                spellCheck={false}
                placeholder="dev:shop:naming/order*"
                data-testid="perm-form-resource"
              />
            </Form.Item>
          ) : (
            <Form.Item
              name="namespace"
              label={t('perm.namespace')}
              extra={t('perm.namespaceHint')}
              rules={[{ required: true, message: t('perm.namespaceRequired') }]}
            >
              <RequiredSelect
                data-testid="perm-form-namespace"
                showSearch
                optionFilterProp="search"
                loading={namespaces.loading}
                placeholder={t('perm.pickNamespace')}
                options={namespaceOptions(namespaces.data ?? [], 'perm-ns')}
              />
            </Form.Item>
          )
        }
      </Form.Item>
      <Form.Item name="action" label={t('perm.action')}>
        <Radio.Group
          optionType="button"
          buttonStyle="solid"
          options={(['r', 'rw', 'w'] as Action[]).map((a) => ({
            value: a,
            label: <span data-testid={`perm-form-action-${a}`}>{t(ACTIONS[a][1])}</span>,
          }))}
        />
      </Form.Item>
      <Form.Item noStyle shouldUpdate>
        {({ getFieldsValue }) => {
          const v = getFieldsValue() as Partial<GrantValues>;
          const resource = resourceOf(v);
          return (
            <div className="grant-preview" data-testid="perm-form-preview">
              <Typography.Text type="secondary">{t('perm.preview')}</Typography.Text>{' '}
              {resource ? (
                <Space size={6} wrap>
                  <Typography.Text code className="mono">
                    {resource}
                  </Typography.Text>
                  {v.action && <ActionTag action={v.action} />}
                </Space>
              ) : (
                <Typography.Text type="secondary">—</Typography.Text>
              )}
            </div>
          );
        }}
      </Form.Item>
    </>
  );
}
