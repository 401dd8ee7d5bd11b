// The namespace of a per-namespace page (services, configurations): picked when the
// address names none, switched in the bar above the table. The server lists only the
// namespaces the user may read, so those are all the selector offers.
import { Alert, Card, Select, Skeleton, Space, Typography } from 'antd';
import { useEffect } from 'react';
import type { Namespace } from '../api';
import { useAuth } from '../auth';
import { useT } from '../i18n';
import type { Resource } from '../hooks';
import { useResource } from '../hooks';
import { href, navigate } from '../router';
import { KEYS, load } from '../storage';
import { fetchNamespaces } from '../pages/Namespaces';
import { LoadError, Notice, PageTitle } from './bits';
import { namespaceOptions } from './Pickers';

/**
 * The namespace to open when the address names none, from those the user may read
 * (the server lists only those): the one last shown, else public, else the first.
 */
function chooseNamespace(readable: Namespace[], last: string | null): string | undefined {
  const ids = readable.map((n) => n.namespace);
  if (last && ids.includes(last)) return last;
  if (ids.includes('public')) return 'public';
  return ids[0];
}

/** Opens `path?namespaceId=` of a readable namespace, or says there is none. */
export function PickNamespace({ path, title }: { path: string; title: string }) {
  const t = useT();
  const namespaces = useResource(fetchNamespaces, []);
  const choice = namespaces.data && chooseNamespace(namespaces.data, load(KEYS.namespace));
  useEffect(() => {
    if (choice) navigate(href(path, { namespaceId: choice }), { replace: true });
  }, [choice, path]);
  let body;
  if (namespaces.data === undefined && namespaces.error !== undefined) {
    body = <LoadError error={namespaces.error} onRetry={() => namespaces.reload()} />;
  } else if (namespaces.data && !choice) {
    body = (
      <Notice
        kind="forbidden"
        title={t('svc.noNamespaces')}
        detail={<span data-testid="no-namespaces">{t('svc.noNamespacesHint')}</span>}
      />
    );
  } else {
    body = <Skeleton active />;
  }
  return (
    <div className="page">
      <PageTitle title={title} />
      <Card>{body}</Card>
    </div>
  );
}

/**
 * The namespace selector of `path`, and a warning when the namespace shown is not one
 * the user may read (unless the page's own answer already says "no access").
 */
export function NamespaceBar({
  namespaceId,
  path,
  namespaces,
  forbidden,
}: {
  namespaceId: string;
  path: string;
  namespaces: Resource<Namespace[]>;
  forbidden: boolean;
}) {
  const t = useT();
  const { session } = useAuth();
  const nsKnown = namespaces.data?.some((n) => n.namespace === namespaceId);
  return (
    <>
      <Card className="ns-bar" size="small">
        <Space wrap size="middle">
          <Typography.Text strong>{t('svc.namespace')}</Typography.Text>
          <Select
            data-testid="ns-switcher"
            aria-label={t('svc.namespace')}
            value={namespaceId}
            style={{ minWidth: 280 }}
            loading={namespaces.loading}
            showSearch
            optionFilterProp="search"
            onChange={(v: string) => navigate(href(path, { namespaceId: v }))}
            options={namespaceOptions(
              namespaces.data ?? [{ namespace: namespaceId, namespaceShowName: namespaceId, type: 2 }],
              'ns-switcher',
            )}
          />
        </Space>
      </Card>
      {namespaces.data && !nsKnown && !forbidden && (
        <Alert
          type="warning"
          showIcon
          style={{ marginBottom: 16 }}
          message={t(session?.globalAdmin ? 'svc.nsMissing' : 'svc.nsUnreadable', { id: namespaceId })}
          data-testid="ns-missing"
        />
      )}
    </>
  );
}
