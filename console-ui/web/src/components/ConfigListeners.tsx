// Who listens to a configuration item: the clients connected to the node the console
// talks to — HTTP long polls held at this moment and gRPC connections that listen — with
// the md5 each holds, marked current (green) or behind (orange). A client connected to
// another node is listed by that node only. Loaded on opening and on Refresh.
import { Button, Modal, Table, Tag, Tooltip, Typography } from 'antd';
import { ReloadOutlined } from '@ant-design/icons';
import type { ConfigListener } from '../api';
import { useT } from '../i18n';
import { useResource } from '../hooks';
import { fetchListeners, type ConfigRef } from '../configs';
import { EmptyState, LoadError, RefreshError } from './bits';

/** How much of an md5 the table shows (the whole one in its tooltip). */
const MD5_SHOWN = 8;

interface Props {
  open: boolean;
  /** the item; kept while the dialog fades out */
  item: ConfigRef | undefined;
  onClose(): void;
}

/** A listener with a row key: the same client may listen twice (two long polls). */
type Row = ConfigListener & { key: string };

function withKeys(listeners: ConfigListener[]): Row[] {
  const seen = new Map<string, number>();
  return listeners.map((l) => {
    const base = `${l.protocol}|${l.address}|${l.client}|${l.md5}`;
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return { ...l, key: `${base}#${n}` };
  });
}

export function ConfigListeners({ open, item, onClose }: Props) {
  const t = useT();
  const itemKey = item ? `${item.namespaceId}|${item.group}|${item.dataId}` : '';
  const list = useResource(async () => (open && item ? withKeys(await fetchListeners(item)) : undefined), [open, itemKey]);

  const columns = [
    {
      title: t('cfg.listenerAddress'),
      dataIndex: 'address',
      key: 'address',
      render: (a: string) => <span className="mono">{a}</span>,
    },
    {
      title: t('detail.protocol'),
      dataIndex: 'protocol',
      key: 'protocol',
      width: 110,
      render: (p: string) => (
        <Tag color={p === 'grpc' ? 'geekblue' : 'cyan'} data-testid="cfg-listener-protocol" data-protocol={p}>
          {p === 'grpc' ? 'gRPC' : p.toUpperCase()}
        </Tag>
      ),
    },
    {
      title: t('cfg.listenerClient'),
      dataIndex: 'client',
      key: 'client',
      render: (c: string) => <span data-testid="cfg-listener-client">{c || '—'}</span>,
    },
    {
      title: 'MD5',
      dataIndex: 'md5',
      key: 'md5',
      width: 120,
      render: (md5: string) =>
        md5 ? (
          <Tooltip title={<span className="mono">{md5}</span>}>
            <Typography.Text className="mono cfg-md5" type="secondary">
              {md5.slice(0, MD5_SHOWN)}
            </Typography.Text>
          </Tooltip>
        ) : (
          <Typography.Text type="secondary">{t('common.none')}</Typography.Text>
        ),
    },
    {
      title: t('cfg.listenerState'),
      dataIndex: 'current',
      key: 'current',
      width: 130,
      render: (current: boolean) => (
        <Tooltip title={current ? undefined : t('cfg.listenerBehindHint')}>
          <Tag color={current ? 'green' : 'orange'} data-testid="cfg-listener-state" data-current={String(current)}>
            {t(current ? 'cfg.listenerCurrent' : 'cfg.listenerBehind')}
          </Tag>
        </Tooltip>
      ),
    },
  ];

  return (
    <Modal
      open={open}
      title={t('cfg.listenersTitle', { dataId: item?.dataId ?? '' })}
      width={860}
      onCancel={onClose}
      destroyOnHidden
      footer={[
        <Button
          key="refresh"
          icon={<ReloadOutlined />}
          loading={list.loading && list.data !== undefined}
          data-testid="cfg-listeners-refresh"
          onClick={() => list.reload()}
        >
          {t('common.refresh')}
        </Button>,
        <Button key="close" type="primary" data-testid="cfg-listeners-close" onClick={onClose}>
          {t('common.close')}
        </Button>,
      ]}
    >
      <div data-testid="cfg-listeners">
        <Typography.Paragraph type="secondary">{t('cfg.listenersHint', { group: item?.group ?? '' })}</Typography.Paragraph>
        <RefreshError error={list.data !== undefined ? list.error : undefined} />
        {list.data === undefined && list.error !== undefined ? (
          <LoadError error={list.error} onRetry={() => list.reload()} />
        ) : (
          <Table<Row>
            data-testid="cfg-listeners-table"
            size="middle"
            columns={columns}
            dataSource={list.data}
            loading={list.loading}
            locale={{ emptyText: list.loading ? ' ' : <EmptyState text={t('cfg.listenersEmpty')} /> }}
            pagination={{ pageSize: 10, hideOnSinglePage: true, showSizeChanger: false, showTotal: (n) => t('common.total', { count: n }) }}
          />
        )}
      </div>
    </Modal>
  );
}
