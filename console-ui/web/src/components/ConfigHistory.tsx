// The versions of a configuration item, newest first: each one viewable, and any but
// the current content restorable. "Roll back" shows the diff from the content stored
// now to the version's, then publishes the version's content (and format) with
// `casMd5` = the md5 it compared against, so a change made meanwhile is refused (409)
// and shown here rather than overwritten. A version of a gray release (a beta or a tag
// version: `publishType` gray) is marked with its name.
import { Alert, App, Button, Descriptions, Modal, Skeleton, Space, Table, Tag, Tooltip, Typography } from 'antd';
import { EyeOutlined, RollbackOutlined } from '@ant-design/icons';
import { useEffect, useState, type ReactNode } from 'react';
import type { ConfigVersion } from '../api';
import { useT, type MessageKey } from '../i18n';
import { usePaging, useResource } from '../hooks';
import { dateTime, errorMessage } from '../format';
import { fetchConfig, fetchHistory, fetchVersion, instant, isConflict, normalizeTags, publishConfig, type ConfigRef } from '../configs';
import { EmptyState, LoadError } from './bits';
import { tagOfGrayName } from '../grays';
import { LineDiff } from './LineDiff';

const OPS: Record<string, [string, MessageKey]> = {
  I: ['green', 'cfg.op.I'],
  U: ['blue', 'cfg.op.U'],
  D: ['red', 'cfg.op.D'],
};

export function OpTag({ op }: { op: string }) {
  const t = useT();
  const [color, label] = OPS[op] ?? ['default', undefined];
  return (
    <Tag color={color} bordered={false} data-testid="cfg-op" data-op={op}>
      {label ? t(label) : op}
    </Tag>
  );
}

/** The gray release a version belongs to (a beta, a tag version); nothing for a formal one. */
export function GrayMark({ v }: { v: ConfigVersion }) {
  const t = useT();
  if (v.publishType !== 'gray') return null;
  const tag = tagOfGrayName(v.grayName);
  return (
    <Tag color={tag === null ? 'orange' : 'purple'} bordered={false} data-testid="cfg-history-gray" data-gray={v.grayName ?? ''}>
      {tag === null ? t('gray.beta') : t('gray.tagNamed', { tag })}
    </Tag>
  );
}

/** When a version was made. */
function versionTime(v: ConfigVersion): string {
  const d = instant(v.lastModifiedTime ?? v.createdTime);
  return d ? dateTime(d) : '—';
}

/** What the dialog shows: the list, one version, or the rollback to one. */
type Pane = { kind: 'list' } | { kind: 'view'; id: string } | { kind: 'rollback'; id: string };

interface Props {
  open: boolean;
  /** the item; kept while the dialog fades out */
  item: ConfigRef | undefined;
  onClose(): void;
  /** after a rollback (the list reloads) */
  onChanged(): void;
}

export function ConfigHistory({ open, item, onClose, onChanged }: Props) {
  const t = useT();
  const { message } = App.useApp();
  const [pane, setPane] = useState<Pane>({ kind: 'list' });
  const { page, pageSize, setPage, pagination } = usePaging(10);
  const itemKey = item ? `${item.namespaceId}|${item.group}|${item.dataId}` : '';
  const list = useResource(
    async () => (open && item ? fetchHistory(item, page, pageSize) : undefined),
    [open, itemKey, page, pageSize],
  );
  // the content stored now: what a rollback compares with, and its compare-and-set md5
  const current = useResource(async () => (open && item ? fetchConfig(item) : undefined), [open, itemKey]);
  const versionId = pane.kind === 'list' ? '' : pane.id;
  const version = useResource(
    async () => (open && item && versionId ? fetchVersion(item, versionId) : undefined),
    [open, itemKey, versionId],
  );
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [conflict, setConflict] = useState(false);

  useEffect(() => {
    if (!open) return;
    setPane({ kind: 'list' });
    setPage(1);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [open, itemKey]);
  useEffect(() => {
    setBusy(false);
    setError(null);
    setConflict(false);
  }, [open, pane]);

  const show = (next: Pane) => {
    // a rollback compares with what is stored at that moment
    if (next.kind === 'rollback') void current.reload();
    setPane(next);
  };

  const rollback = async () => {
    const v = version.data;
    const now = current.data;
    if (!item || !v || v.content === undefined || now === undefined) return;
    setBusy(true);
    setError(null);
    try {
      await publishConfig(
        item,
        {
          content: v.content,
          type: v.type || now?.type || 'text',
          // a gray version records no application: the item keeps its own
          appName: (v.publishType === 'gray' ? undefined : v.appName) ?? now?.appName ?? '',
          desc: now?.desc ?? '',
          tags: normalizeTags(now?.configTags),
        },
        // an item deleted since is published anew
        now?.md5,
      );
    } catch (e) {
      if (isConflict(e)) {
        setConflict(true);
        setError(t('cfg.conflict', { message: errorMessage(e, t) }));
      } else setError(errorMessage(e, t));
      setBusy(false);
      return;
    }
    message.success(t('cfg.rolledBack', { dataId: item.dataId, time: versionTime(v) }));
    // back to the list once it holds the new version
    await Promise.all([list.reload({ silent: true }), current.reload({ silent: true })]);
    setPage(1);
    setPane({ kind: 'list' });
    onChanged();
  };

  const compareAgain = async () => {
    setError(null);
    setConflict(false);
    await current.reload();
  };

  const currentMd5 = current.data?.md5;
  // the current formal version: the newest one not of a gray release
  const newestFormal = list.data?.pageItems.find((v) => v.publishType !== 'gray');
  const columns = [
    {
      title: t('cfg.time'),
      key: 'time',
      width: 180,
      render: (_: unknown, v: ConfigVersion) => <span className="nowrap">{versionTime(v)}</span>,
    },
    {
      title: t('cfg.op'),
      dataIndex: 'opType',
      key: 'op',
      width: 175,
      render: (op: string, v: ConfigVersion) => (
        <Space size={4} wrap>
          <OpTag op={op} />
          {v.publishType === 'gray' && <GrayMark v={v} />}
          {page === 1 && v === newestFormal && op !== 'D' && v.md5 === currentMd5 && (
            <Tag bordered={false} data-testid="cfg-history-current">
              {t('cfg.current')}
            </Tag>
          )}
        </Space>
      ),
    },
    { title: t('cfg.by'), dataIndex: 'srcUser', key: 'by', render: (u?: string) => u || '—' },
    {
      title: t('cfg.srcIp'),
      dataIndex: 'srcIp',
      key: 'ip',
      render: (ip?: string) => (ip ? <span className="mono">{ip}</span> : '—'),
    },
    {
      title: 'MD5',
      dataIndex: 'md5',
      key: 'md5',
      render: (md5: string) => (
        <Typography.Text className="mono cfg-md5" type="secondary">
          {md5}
        </Typography.Text>
      ),
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 200,
      render: (_: unknown, v: ConfigVersion) => {
        const same = v.md5 === currentMd5;
        return (
          <Space size={0}>
            <Button
              type="link"
              size="small"
              icon={<EyeOutlined />}
              data-testid={`cfg-history-view-${v.id}`}
              onClick={() => show({ kind: 'view', id: String(v.id) })}
            >
              {t('cfg.view')}
            </Button>
            <Tooltip title={same ? t('cfg.rollbackSame') : undefined}>
              <Button
                type="link"
                size="small"
                icon={<RollbackOutlined />}
                disabled={same}
                data-testid={`cfg-history-rollback-${v.id}`}
                onClick={() => show({ kind: 'rollback', id: String(v.id) })}
              >
                {t('cfg.rollback')}
              </Button>
            </Tooltip>
          </Space>
        );
      },
    },
  ];

  const v = version.data;
  let body: ReactNode;
  let footer: ReactNode[];
  const back = (
    <Button key="back" data-testid="cfg-history-back" onClick={() => setPane({ kind: 'list' })} disabled={busy}>
      {t('common.back')}
    </Button>
  );
  if (pane.kind === 'list') {
    body =
      list.data === undefined && list.error !== undefined ? (
        <LoadError error={list.error} onRetry={() => list.reload()} />
      ) : (
        <Table<ConfigVersion>
          data-testid="cfg-history-table"
          size="middle"
          rowKey={(r) => String(r.id)}
          columns={columns}
          dataSource={list.data?.pageItems}
          loading={list.loading}
          locale={{ emptyText: list.loading ? ' ' : <EmptyState text={t('cfg.historyEmpty')} /> }}
          pagination={pagination(list.data?.totalCount ?? 0, { showSizeChanger: false })}
        />
      );
    footer = [
      <Button key="close" data-testid="cfg-history-close" onClick={onClose}>
        {t('common.close')}
      </Button>,
    ];
  } else if (version.error !== undefined && !v) {
    body = <LoadError error={version.error} onRetry={() => version.reload()} />;
    footer = [back];
  } else if (!v || (pane.kind === 'rollback' && current.data === undefined && current.error === undefined)) {
    body = <Skeleton active />;
    footer = [back];
  } else if (pane.kind === 'view') {
    body = (
      <>
        <Descriptions size="small" column={3} className="cfg-version-facts">
          <Descriptions.Item label={t('cfg.time')}>{versionTime(v)}</Descriptions.Item>
          <Descriptions.Item label={t('cfg.op')}>
            <OpTag op={v.opType} />
            <GrayMark v={v} />
          </Descriptions.Item>
          <Descriptions.Item label={t('cfg.by')}>{v.srcUser || '—'}</Descriptions.Item>
          <Descriptions.Item label={t('cfg.srcIp')}>{v.srcIp || '—'}</Descriptions.Item>
          <Descriptions.Item label={t('cfg.type')}>{v.type || '—'}</Descriptions.Item>
          <Descriptions.Item label={t('cfg.app')}>{v.appName || '—'}</Descriptions.Item>
          <Descriptions.Item label="MD5" span={3}>
            <span className="mono">{v.md5}</span>
          </Descriptions.Item>
        </Descriptions>
        <pre className="config-content" data-testid="cfg-version-content">
          {v.content}
        </pre>
      </>
    );
    footer = [
      back,
      <Button
        key="rollback"
        type="primary"
        icon={<RollbackOutlined />}
        disabled={v.md5 === currentMd5}
        data-testid="cfg-history-to-rollback"
        onClick={() => show({ kind: 'rollback', id: String(v.id) })}
      >
        {t('cfg.rollback')}
      </Button>,
    ];
  } else {
    body =
      current.error !== undefined && current.data === undefined ? (
        <LoadError error={current.error} onRetry={() => current.reload()} />
      ) : (
        <>
          <Typography.Paragraph type="secondary">
            {t(current.data ? 'cfg.rollbackHint' : 'cfg.rollbackGoneHint', { time: versionTime(v) })}
          </Typography.Paragraph>
          <LineDiff
            testid="cfg-rollback-diff"
            before={current.data?.content ?? ''}
            after={v.content ?? ''}
            beforeLabel={t('cfg.diffCurrent')}
            afterLabel={t('cfg.diffVersion', { time: versionTime(v) })}
          />
        </>
      );
    footer = [
      back,
      conflict && (
        <Button key="again" data-testid="cfg-history-rebase" onClick={compareAgain}>
          {t('cfg.rebase')}
        </Button>
      ),
      <Button
        key="ok"
        type="primary"
        icon={<RollbackOutlined />}
        loading={busy}
        disabled={conflict || current.loading}
        data-testid="cfg-history-rollback-ok"
        onClick={rollback}
      >
        {t('cfg.rollback')}
      </Button>,
    ];
  }

  const title =
    pane.kind === 'list'
      ? t('cfg.historyTitle', { dataId: item?.dataId ?? '' })
      : pane.kind === 'view'
        ? t('cfg.versionTitle', { dataId: item?.dataId ?? '', time: v ? versionTime(v) : '' })
        : t('cfg.rollbackTitle', { dataId: item?.dataId ?? '', time: v ? versionTime(v) : '' });

  return (
    <Modal
      open={open}
      title={title}
      width={pane.kind === 'list' ? 1000 : 960}
      onCancel={busy ? undefined : onClose}
      destroyOnHidden
      footer={footer}
    >
      <div data-testid="cfg-history" data-pane={pane.kind}>
        {pane.kind === 'list' && (
          <Typography.Paragraph type="secondary">
            {t('cfg.historyHint', { group: item?.group ?? '' })}
          </Typography.Paragraph>
        )}
        {body}
        {error && <Alert type="error" showIcon message={error} data-testid="cfg-history-error" style={{ marginTop: 12 }} />}
      </div>
    </Modal>
  );
}
