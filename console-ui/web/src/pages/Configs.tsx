// Configuration items of a namespace (Nacos' config API): search by dataId and group,
// exactly or by pattern; create; edit with a diff against the stored version before
// publishing (compare-and-set, so a concurrent change is refused, not overwritten);
// delete; history with rollback; who listens (on this node). Export downloads the
// namespace, or the rows selected, as Nacos' zip; import (admins) takes one. Config
// changes have no event stream yet: the list loads when the page opens, after the page's
// own writes, and on Refresh.
import { App, Button, Card, Input, Space, Switch, Table, Tag, Tooltip, Typography } from 'antd';
import {
  DeleteOutlined,
  DownloadOutlined,
  EditOutlined,
  HistoryOutlined,
  PlusOutlined,
  ReloadOutlined,
  SearchOutlined,
  UploadOutlined,
  WifiOutlined,
} from '@ant-design/icons';
import { useEffect, useState } from 'react';
import { isForbidden, type ConfigDetail } from '../api';
import { useAuth } from '../auth';
import { useT } from '../i18n';
import { useDebounced, useDialog, usePaging, useResource } from '../hooks';
import type { Route } from '../router';
import { KEYS, load, save } from '../storage';
import { configKey, downloadExport, instant, removeConfig, searchConfigs, type ConfigRef } from '../configs';
import { dateTime, errorMessage } from '../format';
import { ConfirmDialog } from '../components/FormModal';
import { EmptyState, LoadError, PageTitle, RefreshError } from '../components/bits';
import { NamespaceBar, PickNamespace } from '../components/NamespaceBar';
import { ConfigEditor, type EditorTarget } from '../components/ConfigEditor';
import { ConfigHistory } from '../components/ConfigHistory';
import { ConfigImport } from '../components/ConfigImport';
import { ConfigListeners } from '../components/ConfigListeners';
import { fetchNamespaces } from './Namespaces';

export function ConfigsPage({ route }: { route: Route }) {
  const t = useT();
  const namespaceId = route.query.get('namespaceId');
  useEffect(() => {
    if (namespaceId) save(KEYS.namespace, namespaceId);
  }, [namespaceId]);
  if (!namespaceId) return <PickNamespace path="/configs" title={t('cfg.title')} />;
  return <ConfigsOf key={namespaceId} namespaceId={namespaceId} />;
}

function ConfigsOf({ namespaceId }: { namespaceId: string }) {
  const t = useT();
  const { message } = App.useApp();
  const { session } = useAuth();
  const isAdmin = !!session?.globalAdmin;
  const [dataId, setDataId] = useState('');
  const [group, setGroup] = useState('');
  const [blur, setBlur] = useState(() => load(KEYS.configBlur) !== 'false');
  const { page, pageSize, setPage, pagination } = usePaging(Number(load(KEYS.pageSize)) || 10, (size) =>
    save(KEYS.pageSize, String(size)),
  );
  const qDataId = useDebounced(dataId.trim(), 250);
  const qGroup = useDebounced(group.trim(), 250);

  const namespaces = useResource(fetchNamespaces, []);
  const res = useResource(
    () => searchConfigs(namespaceId, { dataId: qDataId, group: qGroup, blur }, page, pageSize),
    [namespaceId, page, pageSize, qDataId, qGroup, blur],
  );
  const forbidden = isForbidden(res.error);

  useEffect(() => setPage(1), [qDataId, qGroup, blur]);
  // Deleting the last row of the last page: step back.
  const count = res.data?.totalCount ?? 0;
  useEffect(() => {
    if (res.data && res.data.pageItems.length === 0 && page > 1 && count > 0) {
      setPage(Math.max(1, Math.ceil(count / pageSize)));
    }
  }, [res.data, page, count, pageSize]);

  const editor = useDialog<EditorTarget>();
  const history = useDialog<ConfigRef>();
  const del = useDialog<ConfigDetail>();
  const listeners = useDialog<ConfigRef>();
  const importer = useDialog<true>();
  // Rows ticked for export, kept across pages and searches until cleared.
  const [selected, setSelected] = useState<ConfigDetail[]>([]);
  const [exporting, setExporting] = useState(false);
  const refOf = (r: { group: string; dataId: string }): ConfigRef => ({ namespaceId, group: r.group, dataId: r.dataId });
  const reload = () => res.reload({ silent: true });
  const filtered = qDataId !== '' || qGroup !== '';

  const submitDelete = async () => {
    const r = del.target;
    if (!r) return;
    await removeConfig(refOf(r));
    message.success(t('cfg.deleted', { dataId: r.dataId }));
    setSelected((rows) => rows.filter((x) => configKey(x) !== configKey(r)));
    del.hide();
    await reload();
  };

  const edit = (r: ConfigDetail) => editor.show({ mode: 'edit', group: r.group, dataId: r.dataId });

  const exportItems = async () => {
    setExporting(true);
    try {
      const file = await downloadExport(namespaceId, selected.map((r) => r.id));
      message.success(t('cfg.exported', { file }));
    } catch (e) {
      message.error(errorMessage(e, t));
    }
    setExporting(false);
  };

  const columns = [
    {
      title: t('cfg.dataId'),
      dataIndex: 'dataId',
      key: 'dataId',
      render: (id: string, r: ConfigDetail) => (
        <a className="strong-link" data-testid={`cfg-link-${configKey(r)}`} onClick={() => edit(r)}>
          {id}
        </a>
      ),
    },
    {
      title: t('cfg.group'),
      dataIndex: 'group',
      key: 'group',
      // a group name is one word: never broken over lines (DEFAULT_GROUP)
      render: (g: string) => (
        <Typography.Text type="secondary" className="nowrap">
          {g}
        </Typography.Text>
      ),
    },
    {
      title: t('cfg.app'),
      dataIndex: 'appName',
      key: 'app',
      render: (a?: string) => a || <Typography.Text type="secondary">—</Typography.Text>,
    },
    {
      title: t('cfg.type'),
      dataIndex: 'type',
      key: 'type',
      width: 90,
      render: (ty: string | undefined, r: ConfigDetail) => (
        <Tag bordered={false} data-testid={`cfg-type-${configKey(r)}`}>
          {ty || 'text'}
        </Tag>
      ),
    },
    {
      title: t('cfg.modified'),
      key: 'modified',
      width: 180,
      render: (_: unknown, r: ConfigDetail) => {
        const d = instant(r.modifyTime ?? r.lastModifiedTime);
        if (!d) return <Typography.Text type="secondary">—</Typography.Text>;
        return (
          <div className="cell-lines" data-testid={`cfg-modified-${configKey(r)}`}>
            <span className="nowrap">{dateTime(d)}</span>
            {r.modifyUser && (
              <Typography.Text type="secondary" className="when-abs">
                {t('cfg.modifiedBy', { user: r.modifyUser })}
              </Typography.Text>
            )}
          </div>
        );
      },
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 340,
      render: (_: unknown, r: ConfigDetail) => (
        <Space size={0} className="nowrap">
          <Button type="link" size="small" icon={<EditOutlined />} data-testid={`cfg-edit-${configKey(r)}`} onClick={() => edit(r)}>
            {t('common.edit')}
          </Button>
          <Button
            type="link"
            size="small"
            icon={<HistoryOutlined />}
            data-testid={`cfg-history-${configKey(r)}`}
            onClick={() => history.show(refOf(r))}
          >
            {t('cfg.history')}
          </Button>
          <Button
            type="link"
            size="small"
            icon={<WifiOutlined />}
            data-testid={`cfg-listeners-${configKey(r)}`}
            onClick={() => listeners.show(refOf(r))}
          >
            {t('cfg.listeners')}
          </Button>
          <Button
            type="link"
            size="small"
            danger
            icon={<DeleteOutlined />}
            data-testid={`cfg-delete-${configKey(r)}`}
            onClick={() => del.show(r)}
          >
            {t('common.delete')}
          </Button>
        </Space>
      ),
    },
  ];

  return (
    <div className="page">
      <PageTitle
        title={t('cfg.title')}
        subtitle={t('cfg.subtitle')}
        extra={
          <>
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="cfg-refresh">
              {t('common.refresh')}
            </Button>
            <Tooltip title={t(selected.length > 0 ? 'cfg.exportSelectedHint' : 'cfg.exportHint')}>
              <Button icon={<DownloadOutlined />} loading={exporting} onClick={exportItems} data-testid="cfg-export">
                {selected.length > 0 ? t('cfg.exportSelected', { count: selected.length }) : t('cfg.export')}
              </Button>
            </Tooltip>
            {isAdmin && (
              <Button icon={<UploadOutlined />} onClick={() => importer.show(true)} data-testid="cfg-import-open">
                {t('cfg.import')}
              </Button>
            )}
            <Button type="primary" icon={<PlusOutlined />} onClick={() => editor.show({ mode: 'create' })} data-testid="cfg-create">
              {t('cfg.create')}
            </Button>
          </>
        }
      />
      <NamespaceBar namespaceId={namespaceId} path="/configs" namespaces={namespaces} forbidden={forbidden} />

      <Card className="table-card">
        <div className="filters">
          <Input
            allowClear
            prefix={<SearchOutlined />}
            placeholder={t('cfg.searchDataId')}
            value={dataId}
            onChange={(e) => setDataId(e.target.value)}
            style={{ width: 260 }}
            data-testid="cfg-search-data-id"
          />
          <Input
            allowClear
            placeholder={t('cfg.searchGroup')}
            value={group}
            onChange={(e) => setGroup(e.target.value)}
            style={{ width: 200 }}
            data-testid="cfg-search-group"
          />
          <Tooltip title={t('cfg.blurHint')}>
            <label className="switch-label">
              <Switch
                size="small"
                checked={blur}
                data-testid="cfg-search-blur"
                onChange={(v) => {
                  setBlur(v);
                  save(KEYS.configBlur, String(v));
                }}
              />
              <span>{t('cfg.blur')}</span>
            </label>
          </Tooltip>
          {selected.length > 0 && (
            <span className="cfg-selection" data-testid="cfg-selection">
              <Typography.Text type="secondary">{t('cfg.selected', { count: selected.length })}</Typography.Text>
              <Button type="link" size="small" onClick={() => setSelected([])} data-testid="cfg-selection-clear">
                {t('cfg.clearSelection')}
              </Button>
            </span>
          )}
        </div>
        <RefreshError error={res.data !== undefined && !forbidden ? res.error : undefined} />
        {res.error !== undefined && (res.data === undefined || forbidden) ? (
          <LoadError error={res.error} onRetry={() => res.reload()} />
        ) : (
          <Table<ConfigDetail>
            data-testid="cfg-table"
            rowKey={configKey}
            rowSelection={{
              selectedRowKeys: selected.map(configKey),
              preserveSelectedRowKeys: true,
              onChange: (_, rows) => setSelected(rows.filter((r): r is ConfigDetail => r !== undefined)),
              getCheckboxProps: (r) => ({ 'aria-label': t('common.selectRow', { name: `${r.group}/${r.dataId}` }) }) as object,
            }}
            columns={columns}
            dataSource={res.data?.pageItems}
            loading={res.loading}
            locale={{
              emptyText: res.loading ? (
                ' '
              ) : filtered ? (
                <EmptyState
                  text={t('cfg.emptyFiltered')}
                  action={
                    <Button
                      onClick={() => {
                        setDataId('');
                        setGroup('');
                      }}
                    >
                      {t('svc.clearFilters')}
                    </Button>
                  }
                />
              ) : (
                <EmptyState
                  text={t('cfg.empty')}
                  action={
                    <Button type="primary" icon={<PlusOutlined />} onClick={() => editor.show({ mode: 'create' })}>
                      {t('cfg.create')}
                    </Button>
                  }
                />
              ),
            }}
            pagination={pagination(count, { pageSizeOptions: [10, 20, 50, 100], hideOnSinglePage: false })}
          />
        )}
      </Card>

      <ConfigEditor open={editor.open} namespaceId={namespaceId} target={editor.target} onClose={editor.hide} onPublished={reload} />
      <ConfigHistory open={history.open} item={history.target} onClose={history.hide} onChanged={reload} />
      <ConfigListeners open={listeners.open} item={listeners.target} onClose={listeners.hide} />
      {isAdmin && (
        <ConfigImport open={importer.open} namespaceId={namespaceId} onClose={importer.hide} onImported={reload} />
      )}
      <ConfirmDialog
        open={del.open}
        title={t('cfg.deleteTitle', { dataId: del.target?.dataId ?? '' })}
        body={t('cfg.deleteBody', { dataId: del.target?.dataId ?? '', group: del.target?.group ?? '' })}
        onCancel={del.hide}
        onConfirm={submitDelete}
      />
    </div>
  );
}
