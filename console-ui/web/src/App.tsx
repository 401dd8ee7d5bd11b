import { Alert, App as AntApp, Button, Card, ConfigProvider, Dropdown, Layout, Menu, Skeleton, Space, Tag, Tooltip, Typography } from 'antd';
import { Notice } from './components/bits';
import enUS from 'antd/locale/en_US';
import zhCN from 'antd/locale/zh_CN';
import {
  AppstoreOutlined,
  ApiOutlined,
  AuditOutlined,
  ClusterOutlined,
  CloudServerOutlined,
  DashboardOutlined,
  DownOutlined,
  FileTextOutlined,
  IdcardOutlined,
  KeyOutlined,
  LockOutlined,
  LogoutOutlined,
  SyncOutlined,
  TeamOutlined,
  UserOutlined,
} from '@ant-design/icons';
import { Component, lazy, Suspense, useEffect, useState, type ReactNode } from 'react';
import { call } from './api';
import { apiBase, learnMembers, switchBack, useEndpoint } from './endpoint';
import { LoadError } from './components/bits';
import { useAuth } from './auth';
import { useI18n, useT, type MessageKey } from './i18n';
import { LanguageSwitch } from './components/LanguageSwitch';
import { href, navigate, useRoute, type Route } from './router';
import { KEYS, load } from './storage';
import { LoginPage } from './pages/Login';
import { NamespacesPage } from './pages/Namespaces';
import { ServicesPage } from './pages/Services';
import { ConfigsPage } from './pages/Configs';
import { ServiceDetailPage } from './pages/ServiceDetail';
import { SyncPage } from './pages/Sync';
import { ClusterPage } from './pages/Cluster';
import { PasswordDialog, UsersPage } from './pages/Users';
import { TokensPage } from './pages/Tokens';
import { RolesPage } from './pages/Roles';
import { PermissionsPage } from './pages/Permissions';
import { AuditPage } from './pages/Audit';
import { ClientsPage } from './pages/Clients';
import { NavRefresh, useDialog, useInterval } from './hooks';

// The overview and its chart library load when first opened, so the login page stays small.
const OverviewPage = lazy(() => import('./pages/Overview'));

/** The page shown after login and at `/`. */
const LANDING = '/overview';

/** How often the shell re-reads the members, for moving to another one (endpoint.ts). */
const MEMBERS_MS = 15_000;

export function App() {
  const { lang } = useI18n();
  return (
    <ConfigProvider
      locale={lang === 'zh' ? zhCN : enUS}
      theme={{
        token: { colorPrimary: '#1668dc', borderRadius: 8, fontSize: 14 },
        components: { Layout: { headerBg: '#ffffff', siderBg: '#0f1c2e', headerHeight: 56 } },
      }}
    >
      <AntApp>
        <Routes />
      </AntApp>
    </ConfigProvider>
  );
}

/** Pages only admins may open: their menu items are hidden from everyone else. */
const ADMIN_PAGES = new Set(['sync', 'clients', 'users', 'roles', 'permissions', 'tokens', 'audit']);

/** Pages of one namespace: their menu items open the namespace last shown. */
const PER_NAMESPACE = new Set(['services', 'configs']);

function Routes() {
  const route = useRoute();
  const { session } = useAuth();
  const onLogin = route.path === '/login';

  let redirect: string | null = null;
  if (!session && !onLogin) {
    const next = route.path === '/' ? undefined : route.raw;
    redirect = href('/login', { next });
  } else if (session && onLogin) {
    const next = route.query.get('next');
    const nextTop = next?.split(/[/?]/)[1] ?? '';
    // the page someone else had open may be one this user may not see
    const allowed = session.globalAdmin || !ADMIN_PAGES.has(nextTop);
    redirect = next && next.startsWith('/') && !next.startsWith('/login') && allowed ? next : LANDING;
  } else if (session && route.path === '/') {
    redirect = LANDING;
  }
  useEffect(() => {
    if (redirect) navigate(redirect, { replace: true });
  }, [redirect]);

  if (redirect) return null;
  if (!session) return <LoginPage />;
  return <Shell route={route} />;
}

const titles: Record<string, MessageKey> = {
  overview: 'nav.overview',
  namespaces: 'nav.namespaces',
  services: 'nav.services',
  service: 'detail.title',
  configs: 'nav.configs',
  sync: 'nav.sync',
  cluster: 'nav.cluster',
  clients: 'nav.clients',
  users: 'nav.users',
  roles: 'nav.roles',
  permissions: 'nav.permissions',
  tokens: 'nav.tokens',
  audit: 'nav.audit',
};

function Shell({ route }: { route: Route }) {
  const { t } = useI18n();
  const { session, logout } = useAuth();
  const { message } = AntApp.useApp();
  const top = route.segments[0] ?? '';
  const isAdmin = !!session?.globalAdmin;
  const ownPassword = useDialog<true>();
  useMembers();

  useEffect(() => {
    const key = titles[top];
    document.title = key ? `${t(key)} · roster` : 'roster';
  }, [top, t]);

  // The namespace last shown, if any; else the page picks a readable one.
  const namespaceLink = (path: string) => {
    const ns = load(KEYS.namespace);
    return ns ? href(path, { namespaceId: ns }) : path;
  };

  // A navigation click always shows fresh data: another page opens (and loads),
  // the page already shown loads again.
  const [navTick, setNavTick] = useState(0);
  const go = (to: string) => {
    if (window.location.hash === '#' + to) setNavTick((n) => n + 1);
    else navigate(to);
  };

  const item = (key: string, icon: ReactNode, label: MessageKey) => ({
    key,
    icon,
    label: <span data-testid={`nav-${key}`}>{t(label)}</span>,
  });
  const items = [
    item('overview', <DashboardOutlined />, 'nav.overview'),
    item('namespaces', <AppstoreOutlined />, 'nav.namespaces'),
    item('services', <CloudServerOutlined />, 'nav.services'),
    item('configs', <FileTextOutlined />, 'nav.configs'),
    item('sync', <SyncOutlined />, 'nav.sync'),
    item('cluster', <ClusterOutlined />, 'nav.cluster'),
    item('clients', <ApiOutlined />, 'nav.clients'),
    item('users', <TeamOutlined />, 'nav.users'),
    item('roles', <IdcardOutlined />, 'nav.roles'),
    item('permissions', <LockOutlined />, 'nav.permissions'),
    item('tokens', <KeyOutlined />, 'nav.tokens'),
    item('audit', <AuditOutlined />, 'nav.audit'),
  ].filter((i) => isAdmin || !ADMIN_PAGES.has(i.key));
  const selected = top === 'service' ? 'services' : top;

  const page =
    ADMIN_PAGES.has(top) && !isAdmin ? (
      <Notice kind="forbidden" title="403" detail={<span data-testid="admin-only">{t('common.adminOnly')}</span>} />
    ) : (
      pageOf(top, route) ?? (
        <Notice
          kind="missing"
          title="404"
          detail={t('common.notFound')}
          extra={
            <Button type="primary" onClick={() => navigate(LANDING)}>
              {t('common.goHome')}
            </Button>
          }
        />
      )
    );

  return (
    <Layout className="shell">
      <Layout.Sider width={216} breakpoint="lg" collapsedWidth={64} className="shell-sider">
        <a
          className="brand"
          href={'#' + LANDING}
          data-testid="brand"
          onClick={(e) => {
            e.preventDefault();
            go(LANDING);
          }}
        >
          <span className="brand-mark">r</span>
          <span className="brand-text">
            <span className="brand-name">{t('app.name')}</span>
            <span className="brand-sub">{t('app.subtitle')}</span>
          </span>
        </a>
        <Menu
          theme="dark"
          mode="inline"
          selectedKeys={[selected]}
          items={items}
          onClick={({ key }) => go(PER_NAMESPACE.has(key) ? namespaceLink('/' + key) : '/' + key)}
          className="shell-menu"
        />
      </Layout.Sider>
      <Layout>
        <Layout.Header className="shell-header">
          <div />
          <Space size="middle">
            <EndpointTag />
            <LanguageSwitch />
            <Dropdown
              trigger={['click']}
              menu={{
                items: [{ key: 'password', icon: <KeyOutlined />, label: <span data-testid="own-password">{t('users.changePassword')}</span> }],
                onClick: () => ownPassword.show(true),
              }}
            >
              <Button type="text" className="who" data-testid="current-user">
                <UserOutlined />
                <Typography.Text strong>{session?.username}</Typography.Text>
                {isAdmin && (
                  <Tag color="blue" bordered={false} style={{ marginInlineEnd: 0 }}>
                    {t('header.admin')}
                  </Tag>
                )}
                <DownOutlined style={{ fontSize: 10, color: '#8c8c8c' }} />
              </Button>
            </Dropdown>
            <Button
              icon={<LogoutOutlined />}
              data-testid="logout"
              onClick={() => {
                logout();
                // whoever logs in next starts afresh, not on this user's page
                navigate('/login', { replace: true });
                message.info(t('header.loggedOut'));
              }}
            >
              {t('header.logout')}
            </Button>
          </Space>
        </Layout.Header>
        <Layout.Content className="shell-content">
          <EndpointBanner />
          <NavRefresh.Provider value={navTick}>{page}</NavRefresh.Provider>
        </Layout.Content>
        <PasswordDialog open={ownPassword.open} username={session?.username ?? ''} onClose={ownPassword.hide} />
      </Layout>
    </Layout>
  );
}

/** The page of the first path segment; null when there is none. */
function pageOf(top: string, route: Route): ReactNode {
  switch (top) {
    case 'overview':
      return (
        <LazyBoundary>
          <Suspense
            fallback={
              <div className="page">
                <Card>
                  <Skeleton active />
                </Card>
              </div>
            }
          >
            <OverviewPage />
          </Suspense>
        </LazyBoundary>
      );
    case 'namespaces':
      return <NamespacesPage />;
    case 'services':
      return <ServicesPage route={route} />;
    case 'service':
      return <ServiceDetailPage route={route} />;
    case 'configs':
      return <ConfigsPage route={route} />;
    case 'sync':
      return <SyncPage />;
    case 'cluster':
      return <ClusterPage />;
    case 'clients':
      return <ClientsPage />;
    case 'users':
      return <UsersPage />;
    case 'roles':
      return <RolesPage />;
    case 'permissions':
      return <PermissionsPage route={route} />;
    case 'tokens':
      return <TokensPage />;
    case 'audit':
      return <AuditPage />;
    default:
      return null;
  }
}

/**
 * Keeps the list of members (and their HTTP addresses) fresh for moving to another one.
 * It reads Nacos' node list rather than `/api/v1/cluster`, so that the cluster page's
 * own reads stay the only reads of that route (the browser test checks that pages are
 * quiet unless asked).
 */
function useMembers(): void {
  const learn = async () => {
    const base = apiBase();
    try {
      const a = await call<{ data?: NacosNode[] }>('GET', '/nacos/v1/core/cluster/nodes');
      const list = (a.data ?? [])
        .filter((n) => typeof n.extendInfo?.roster?.id === 'number')
        .map((n) => ({ id: n.extendInfo!.roster!.id, http: n.address }));
      learnMembers(base, list);
    } catch {
      /* the pages report their own errors */
    }
  };
  useEffect(() => {
    void learn();
  }, []);
  useInterval(learn, MEMBERS_MS, true);
}

/** What the shell reads of a node in `/nacos/v1/core/cluster/nodes`. */
interface NacosNode {
  address: string;
  extendInfo?: { roster?: { id: number } };
}

/** Which node the console talks to, in the header. */
function EndpointTag() {
  const t = useT();
  const { current, left } = useEndpoint();
  if (current.id === null) return null;
  return (
    <Tooltip title={t('endpoint.tooltip', { address: current.address })}>
      <Tag color={left ? 'orange' : 'default'} bordered={false} data-testid="endpoint-node" data-node={current.id} tabIndex={0}>
        {t('endpoint.node', { id: current.id })}
      </Tag>
    </Tooltip>
  );
}

/** While the console talks to another member than the one that served it: says so, and offers to go back. */
function EndpointBanner() {
  const t = useT();
  const { current, home, left } = useEndpoint();
  if (current.base === '' || left === null) return null;
  return (
    <Alert
      type="warning"
      showIcon
      className="endpoint-banner"
      data-testid="endpoint-banner"
      message={t('endpoint.moved', {
        from: home.id === null ? home.address : t('endpoint.nodeAt', { id: home.id, address: home.address }),
        to: t('endpoint.nodeAt', { id: current.id ?? '?', address: current.address }),
      })}
      action={
        <Button size="small" onClick={switchBack} data-testid="endpoint-back">
          {t('endpoint.back', { id: home.id ?? home.address })}
        </Button>
      }
    />
  );
}

/** A lazily loaded page whose chunk could not be fetched: says so, with a retry (a reload). */
class LazyBoundary extends Component<{ children: ReactNode }, { error: unknown }> {
  state = { error: undefined as unknown };
  static getDerivedStateFromError(error: unknown) {
    return { error };
  }
  render() {
    if (this.state.error !== undefined) {
      return (
        <div className="page">
          <Card>
            <LoadError error={this.state.error} onRetry={() => window.location.reload()} />
          </Card>
        </div>
      );
    }
    return this.props.children;
  }
}
