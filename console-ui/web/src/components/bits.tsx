import { Alert, Badge, Button, Empty, Popover, Space, Switch, Tag, Tooltip, Typography } from 'antd';
import { ExclamationCircleFilled, ImportOutlined, ReloadOutlined, StopOutlined, QuestionCircleOutlined } from '@ant-design/icons';
import type { ReactElement, ReactNode } from 'react';
import { useT } from '../i18n';
import type { LiveMode } from '../live';
import { clock, errorMessage } from '../format';
import { splitProvenance } from '../metadata';
import { isForbidden } from '../api';

export function MetaChips({ meta, max = 4 }: { meta?: Record<string, string>; max?: number }) {
  const t = useT();
  const entries = Object.entries(meta ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return <Typography.Text type="secondary">{t('meta.none')}</Typography.Text>;
  const chip = ([k, v]: [string, string]) => (
    <Tag key={k} className="meta-chip" bordered={false}>
      <span className="meta-k">{k}</span>=<span className="meta-v">{v}</span>
    </Tag>
  );
  const shown = entries.slice(0, max);
  const rest = entries.slice(max);
  return (
    <span className="meta-chips">
      {shown.map(chip)}
      {rest.length > 0 && (
        <Popover content={<div className="meta-chips meta-pop">{rest.map(chip)}</div>} trigger={['hover', 'focus']}>
          {/* focusable, so the rest of the metadata opens from the keyboard too */}
          <Tag bordered={false} className="meta-more" tabIndex={0}>
            {t('meta.more', { count: rest.length })}
          </Tag>
        </Popover>
      )}
    </span>
  );
}

/**
 * An instance's metadata in a table cell: an imported instance shows one "imported by task
 * X" badge (its provenance keys in the badge's tooltip) and the rest of its metadata as chips.
 * The edit dialog shows every key.
 */
export function InstanceMeta({ meta, max = 3 }: { meta?: Record<string, string>; max?: number }) {
  const t = useT();
  const { task, rest } = splitProvenance(meta);
  if (task === null) return <MetaChips meta={meta} max={max} />;
  const provenance = Object.entries(meta ?? {}).filter(([k]) => !(k in rest));
  return (
    <span className="meta-chips">
      <Tooltip
        trigger={['hover', 'focus']}
        title={
          <div className="mono meta-provenance">
            {provenance.map(([k, v]) => (
              <div key={k}>
                {k}={v}
              </div>
            ))}
          </div>
        }
      >
        <Tag
          color="geekblue"
          bordered={false}
          icon={<ImportOutlined />}
          className="meta-imported"
          tabIndex={0}
          data-testid="meta-imported"
          data-task={task}
        >
          {t('meta.importedBy', { task })}
        </Tag>
      </Tooltip>
      {Object.keys(rest).length > 0 && <MetaChips meta={rest} max={Math.max(1, max - 1)} />}
    </span>
  );
}

export function LiveBadge({ mode }: { mode: LiveMode }) {
  const t = useT();
  const [status, text, hint]: ['success' | 'warning' | 'default', string, string] =
    mode === 'live'
      ? ['success', t('live.live'), t('live.liveHint')]
      : mode === 'polling'
        ? ['warning', t('live.polling'), t('live.pollingHint')]
        : ['default', t('live.connecting'), ''];
  return (
    <Tooltip title={hint || undefined}>
      <span data-testid="live-mode" data-mode={mode} className="live-badge">
        <Badge status={status} text={text} className={mode === 'live' ? 'live-pulse' : undefined} />
      </span>
    </Tooltip>
  );
}

/** A full-area error, for when a page has nothing to show (a 403 says so: no access). */
export function LoadError({ error, onRetry }: { error: unknown; onRetry?(): void }) {
  const t = useT();
  const forbidden = isForbidden(error);
  return (
    <Notice
      kind={forbidden ? 'forbidden' : 'error'}
      title={forbidden ? t('common.noAccess') : t('common.loadFailed')}
      detail={<span data-testid="load-error">{errorMessage(error, t)}</span>}
      extra={
        onRetry && (
          <Button type="primary" onClick={onRetry}>
            {t('common.retry')}
          </Button>
        )
      }
    />
  );
}

/** A slim banner for a failed background refresh while older data stays on screen. */
export function RefreshError({ error }: { error: unknown }) {
  const t = useT();
  if (!error) return null;
  return (
    <Alert
      type="warning"
      showIcon
      banner
      style={{ marginBottom: 12 }}
      message={t('common.refreshFailed', { message: errorMessage(error, t) })}
    />
  );
}

export function EmptyState({ text, action }: { text: ReactNode; action?: ReactNode }) {
  return (
    <Empty image={Empty.PRESENTED_IMAGE_SIMPLE} description={text} data-testid="empty-state">
      {action}
    </Empty>
  );
}

export function PageTitle({ title, subtitle, extra }: { title: ReactNode; subtitle?: ReactNode; extra?: ReactNode }) {
  return (
    <div className="page-title">
      <div>
        <Typography.Title level={3} style={{ margin: 0 }}>
          {title}
        </Typography.Title>
        {subtitle && <Typography.Text type="secondary">{subtitle}</Typography.Text>}
      </div>
      {extra && <Space wrap>{extra}</Space>}
    </div>
  );
}

/** A centred icon, title, detail and actions (antd's Result without its heavy illustrations). */
export function Notice({
  kind,
  title,
  detail,
  extra,
}: {
  kind: 'error' | 'forbidden' | 'missing';
  title: ReactNode;
  detail?: ReactNode;
  extra?: ReactNode;
}) {
  const icon =
    kind === 'forbidden' ? (
      <StopOutlined style={{ color: '#cf1322' }} />
    ) : kind === 'missing' ? (
      <QuestionCircleOutlined style={{ color: '#8c8c8c' }} />
    ) : (
      <ExclamationCircleFilled style={{ color: '#faad14' }} />
    );
  return (
    <div className="notice" data-testid={`notice-${kind}`}>
      <div className="notice-icon">{icon}</div>
      <Typography.Title level={4} style={{ margin: 0 }}>
        {title}
      </Typography.Title>
      {detail && <Typography.Paragraph type="secondary" className="notice-detail">{detail}</Typography.Paragraph>}
      {extra && <div className="notice-extra">{extra}</div>}
    </div>
  );
}

/**
 * A disabled action with the reason it is disabled, shown on hover and on keyboard
 * focus. A disabled button takes neither pointer events nor focus, so the tooltip hangs
 * on a focusable wrapper that names the reason for screen readers too. Without a
 * reason, the action as it is.
 */
export function WhyDisabled({ why, testid, children }: { why: string | null | undefined; testid?: string; children: ReactElement }) {
  if (!why) return children;
  return (
    <Tooltip title={why} trigger={['hover', 'focus']}>
      <span className="disabled-action" tabIndex={0} role="group" aria-label={why} data-testid={testid}>
        {children}
      </span>
    </Tooltip>
  );
}

/**
 * The title-bar controls of a page that refreshes itself: the auto-refresh switch (its
 * label says how often), when the page last refreshed, and a Refresh button. `id`
 * prefixes their test ids (`ID-auto`, `ID-updated`, `ID-refresh`).
 */
export function AutoRefreshControls(props: {
  id: string;
  label: string;
  auto: boolean;
  onAuto(on: boolean): void;
  updated: Date | null;
  onRefresh(): void;
}) {
  const t = useT();
  // its own Space: a fragment's children would reach the title's Space as one item,
  // the label and the time then running into each other
  return (
    <Space wrap>
      <label className="switch-label">
        <Switch size="small" checked={props.auto} onChange={props.onAuto} data-testid={`${props.id}-auto`} />
        <span>{props.label}</span>
      </label>
      {props.updated && (
        <Typography.Text type="secondary" data-testid={`${props.id}-updated`}>
          {t('cluster.updated', { time: clock(props.updated) })}
        </Typography.Text>
      )}
      <Button icon={<ReloadOutlined />} onClick={props.onRefresh} data-testid={`${props.id}-refresh`}>
        {t('common.refresh')}
      </Button>
    </Space>
  );
}
