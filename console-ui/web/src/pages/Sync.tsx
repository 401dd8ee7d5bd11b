import {
  App,
  Button,
  Card,
  Checkbox,
  Form,
  Input,
  Select,
  Space,
  Table,
  Tag,
  Tooltip,
  Typography,
  type FormInstance,
} from 'antd';
import {
  DeleteOutlined,
  PauseCircleOutlined,
  PlayCircleOutlined,
  PlusOutlined,
  ReloadOutlined,
  CloudUploadOutlined,
} from '@ant-design/icons';
import { useState } from 'react';
import { call, type SyncState, type SyncTask } from '../api';
import { useT, type MessageKey } from '../i18n';
import { useDialog, useNow, useResource } from '../hooks';
import { useLive } from '../live';
import { useAuth } from '../auth';
import { ConfirmDialog, FormModal } from '../components/FormModal';
import { EmptyState, LiveBadge, LoadError, PageTitle, RefreshError } from '../components/bits';
import { ago, dateTime, errorMessage, moment, num } from '../format';
import { namespaceOptions } from '../components/Pickers';
import { fetchNamespaces } from './Namespaces';
import { DEFAULT_GROUP } from '../configs';

interface TaskValues {
  name: string;
  source: string;
  namespace?: string;
  group?: string;
  services?: string;
  dryRun?: boolean;
}

/** The target namespace of a task that names none and reads no Nacos source. */
const DEFAULT_NAMESPACE = 'public';

const stateTag: Record<SyncState, [color: string, label: MessageKey]> = {
  pending: ['blue', 'sync.state.pending'],
  starting: ['blue', 'sync.state.starting'],
  running: ['green', 'sync.state.running'],
  holding: ['orange', 'sync.state.holding'],
  error: ['red', 'sync.state.error'],
  paused: ['default', 'sync.state.paused'],
};

/** One example source URL per scheme; the form offers them to click. */
const EXAMPLES = [
  'etcd://127.0.0.1:2379?layout=go-micro',
  'zookeeper://127.0.0.1:2181?layout=dubbo',
  'consul://127.0.0.1:8500?dc=dc1',
  'eureka://127.0.0.1:8761/eureka',
  'nacos://127.0.0.1:8848?namespace=public',
];

/**
 * The state to show: the operator's pause or resume shows at once, before the runner
 * reports it (a resumed task waits to start again).
 */
function shownState(task: SyncTask): SyncState {
  const reported = task.status?.state ?? 'pending';
  if (task.paused) return 'paused';
  return reported === 'paused' ? 'pending' : reported;
}

const TASKS = '/api/v1/sync/tasks';
const taskPath = (name: string) => `${TASKS}/${encodeURIComponent(name)}`;
/** How often "12 s ago" texts are renewed, ms (no fetch: task events bring changes). */
const CLOCK_MS = 1000;

export function SyncPage() {
  const t = useT();
  const { message } = App.useApp();
  const { session } = useAuth();
  const res = useResource(async () => (await call<{ tasks: SyncTask[] }>('GET', TASKS)).tasks, []);
  // Tasks made, paused or deleted elsewhere, and every status their runner reports
  // (task events are for admins, as the task list is).
  const live = useLive({ task: { refresh: () => res.reload({ silent: true }) } }, { enabled: !!session?.globalAdmin });

  const [form] = Form.useForm<TaskValues>();
  const create = useDialog<true>();
  const del = useDialog<SyncTask>();
  const apply = useDialog<SyncTask>();
  // the task whose pause/resume is on its way
  const [acting, setActing] = useState<string | null>(null);

  const submitCreate = async (v: TaskValues) => {
    const name = v.name.trim();
    const optional = (s?: string) => s?.trim() || undefined;
    await call('POST', TASKS, undefined, {
      json: {
        name,
        source: v.source.trim(),
        namespace: v.namespace || undefined,
        group: optional(v.group),
        services: optional(v.services),
        dryRun: !!v.dryRun,
      },
    });
    message.success(t('sync.created', { name }));
    create.hide();
    await res.reload({ silent: true });
  };

  const setPaused = async (task: SyncTask, pause: boolean) => {
    setActing(task.name);
    try {
      const updated = await call<SyncTask>('POST', `${taskPath(task.name)}/${pause ? 'pause' : 'resume'}`);
      if (updated && res.data) res.setData(res.data.map((x) => (x.name === updated.name ? updated : x)));
      message.success(t(pause ? 'sync.paused' : 'sync.resumed', { name: task.name }));
    } catch (e) {
      message.error(errorMessage(e, t));
    } finally {
      setActing(null);
    }
    // supersedes a poll that left before the change
    await res.reload({ silent: true });
  };

  const submitDelete = async () => {
    const task = del.target;
    if (!task) return;
    await call('DELETE', taskPath(task.name));
    message.success(t('sync.deleted', { name: task.name }));
    del.hide();
    await res.reload({ silent: true });
  };

  // A dry run becomes a real import: the runner restarts and writes what it reported.
  const submitApply = async () => {
    const task = apply.target;
    if (!task) return;
    const updated = await call<SyncTask>('POST', `${taskPath(task.name)}/apply`);
    if (updated && res.data) res.setData(res.data.map((x) => (x.name === updated.name ? updated : x)));
    message.success(t('sync.applied', { name: task.name }));
    apply.hide();
    await res.reload({ silent: true });
  };

  const secondary = (text: string) => <Typography.Text type="secondary">{text}</Typography.Text>;

  // The target a task writes to, named as `roster sync` names it: its own, else the source's
  // (Nacos sources), else `public` / `DEFAULT_GROUP`.
  const targetName = (r: SyncTask, own: string | null | undefined, fallback: string) => {
    if (own) return own;
    return r.source.startsWith('nacos://') ? secondary(t('sync.sourceOr', { name: fallback })) : fallback;
  };

  const holdTip = (r: SyncTask) => {
    const reasons = r.status?.holdReasons ?? [];
    return reasons.length ? t('sync.holdReasons', { list: reasons.join('; ') }) : undefined;
  };

  const columns = [
    {
      title: t('sync.nameSource'),
      dataIndex: 'name',
      key: 'name',
      render: (n: string, r: SyncTask) => (
        <div className="cell-lines">
          <Space size={6}>
            <Typography.Text strong className="sync-name" ellipsis={{ tooltip: n }}>
              {n}
            </Typography.Text>
            {r.dryRun && (
              <Tag color="purple" bordered={false} data-testid={`sync-dry-${n}`}>
                {t('sync.dryRun')}
              </Tag>
            )}
          </Space>
          <Typography.Text type="secondary" className="mono sync-source" ellipsis={{ tooltip: r.source }}>
            {r.source}
          </Typography.Text>
        </div>
      ),
    },
    {
      title: t('sync.targetFilter'),
      key: 'target',
      render: (_: unknown, r: SyncTask) => (
        <div className="cell-lines">
          <span className="mono sync-target">
            {targetName(r, r.namespace, DEFAULT_NAMESPACE)} / {targetName(r, r.group, DEFAULT_GROUP)}
          </span>
          {r.services ? (
            <Typography.Text className="mono sync-filter" ellipsis={{ tooltip: r.services }}>
              {r.services}
            </Typography.Text>
          ) : (
            secondary(t('sync.allServices'))
          )}
        </div>
      ),
    },
    {
      title: t('sync.stateError'),
      key: 'state',
      render: (_: unknown, r: SyncTask) => {
        const state = shownState(r);
        // a state this console does not know yet is shown as the server names it
        const [color, label] = stateTag[state] ?? ['default', undefined];
        const error = r.status?.lastError;
        return (
          <div className="cell-lines">
            <Tooltip title={holdTip(r)}>
              <Tag color={color} data-testid={`sync-state-${r.name}`} data-state={state}>
                {label ? t(label) : state}
              </Tag>
            </Tooltip>
            {error && (
              <Typography.Text type="danger" className="sync-error" ellipsis={{ tooltip: error }} data-testid={`sync-error-${r.name}`}>
                {error}
              </Typography.Text>
            )}
          </div>
        );
      },
    },
    {
      title: t('sync.counts'),
      key: 'counts',
      render: (_: unknown, r: SyncTask) => {
        const s = r.status;
        if (!s) return secondary('—');
        const held = s.heldDeletions ?? 0;
        const skipped = (s.skipped ?? 0) + (s.copiesIgnored ?? 0);
        return (
          <div className="cell-lines nowrap">
            <span>
              {t(s.services === 1 ? 'sync.oneService' : 'sync.nServices', { count: num(s.services) })}
              {' · '}
              <span data-testid={`sync-instances-${r.name}`}>
                {t(s.instances === 1 ? 'sync.oneInstance' : 'sync.nInstances', { count: num(s.instances) })}
              </span>
            </span>
            <Typography.Text type="secondary">
              <Tooltip title={holdTip(r)}>
                <span className={held > 0 ? 'num-warn' : undefined}>{t('sync.nHeld', { count: num(held) })}</span>
              </Tooltip>
              {' · '}
              <Tooltip
                title={skipped > 0 ? t('sync.skippedHint', { skipped: s.skipped ?? 0, copies: s.copiesIgnored ?? 0 }) : undefined}
              >
                <span>{t('sync.nSkipped', { count: num(skipped) })}</span>
              </Tooltip>
            </Typography.Text>
          </div>
        );
      },
    },
    {
      title: t('sync.lastSync'),
      key: 'lastSync',
      render: (_: unknown, r: SyncTask) => {
        const ms = r.status?.lastSyncMs;
        if (!ms) return secondary(t('sync.never'));
        return <LastSync name={r.name} ms={ms} />;
      },
    },
    {
      title: t('sync.runner'),
      key: 'runner',
      align: 'right' as const,
      render: (_: unknown, r: SyncTask) => {
        const id = r.status?.runner;
        return id === null || id === undefined ? secondary('—') : <span data-testid={`sync-runner-${r.name}`}>{id}</span>;
      },
    },
    {
      title: t('common.actions'),
      key: 'actions',
      width: 170,
      render: (_: unknown, r: SyncTask) => (
        <Space size={0} className="nowrap">
          {r.paused ? (
            <Button
              type="link"
              size="small"
              icon={<PlayCircleOutlined />}
              loading={acting === r.name}
              data-testid={`sync-resume-${r.name}`}
              onClick={() => setPaused(r, false)}
            >
              {t('sync.resume')}
            </Button>
          ) : (
            <Button
              type="link"
              size="small"
              icon={<PauseCircleOutlined />}
              loading={acting === r.name}
              data-testid={`sync-pause-${r.name}`}
              onClick={() => setPaused(r, true)}
            >
              {t('sync.pause')}
            </Button>
          )}
          <Button
            type="link"
            size="small"
            danger
            icon={<DeleteOutlined />}
            data-testid={`sync-delete-${r.name}`}
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
        title={t('sync.title')}
        subtitle={t('sync.subtitle')}
        extra={
          <>
            {session?.globalAdmin && <LiveBadge mode={live} />}
            <Button icon={<ReloadOutlined />} onClick={() => res.reload()} data-testid="sync-refresh">
              {t('common.refresh')}
            </Button>
            <Button type="primary" icon={<PlusOutlined />} onClick={() => create.show(true)} data-testid="sync-create">
              {t('sync.create')}
            </Button>
          </>
        }
      />
      {res.error !== undefined && res.data === undefined ? (
        <Card>
          <LoadError error={res.error} onRetry={() => res.reload()} />
        </Card>
      ) : (
        <Card className="table-card">
          <RefreshError error={res.data !== undefined ? res.error : undefined} />
          <Table<SyncTask>
            data-testid="sync-table"
            rowKey="name"
            size="middle"
            columns={columns}
            dataSource={res.data}
            loading={res.loading}
            pagination={false}
            expandable={{ rowExpandable: (r) => r.dryRun, expandedRowRender: (r) => <DryRunReport task={r} onApply={() => apply.show(r)} /> }}
            rowClassName={(r) => (r.paused ? 'row-offline' : '')}
            locale={{
              emptyText: res.loading ? (
                ' '
              ) : (
                <EmptyState
                  text={t('sync.empty')}
                  action={
                    <Button type="primary" icon={<PlusOutlined />} onClick={() => create.show(true)}>
                      {t('sync.create')}
                    </Button>
                  }
                />
              ),
            }}
          />
        </Card>
      )}

      <FormModal<TaskValues>
        open={create.open}
        title={t('sync.create')}
        testid="sync-form"
        form={form}
        width={620}
        initialValues={{ dryRun: false }}
        okText={t('common.create')}
        onCancel={create.hide}
        onSubmit={submitCreate}
      >
        <TaskFormFields form={form} />
      </FormModal>

      <ConfirmDialog
        open={apply.open}
        title={t('sync.applyTitle', { name: apply.target?.name ?? '' })}
        body={t('sync.applyBody', { name: apply.target?.name ?? '' })}
        okText={t('sync.applyOk')}
        onCancel={apply.hide}
        onConfirm={submitApply}
      />
      <ConfirmDialog
        open={del.open}
        title={t('sync.deleteTitle', { name: del.target?.name ?? '' })}
        body={t(del.target?.dryRun ? 'sync.deleteBodyDry' : 'sync.deleteBody', { name: del.target?.name ?? '' })}
        onCancel={del.hide}
        onConfirm={submitDelete}
      />
    </div>
  );
}

function TaskFormFields({ form }: { form: FormInstance<TaskValues> }) {
  const t = useT();
  const namespaces = useResource(fetchNamespaces, []);
  return (
    <>
      <Form.Item
        name="name"
        label={t('sync.name')}
        extra={t('sync.nameHint')}
        rules={[
          { required: true, whitespace: true, message: t('sync.nameRequired') },
          { pattern: /^\s*[A-Za-z0-9._-]{1,64}\s*$/, message: t('sync.nameInvalid') },
        ]}
      >
        <Input autoFocus autoComplete="off" maxLength={64} data-testid="sync-form-name" />
      </Form.Item>
      <Form.Item
        name="source"
        label={t('sync.sourceUrl')}
        rules={[{ required: true, whitespace: true, message: t('sync.sourceRequired') }]}
        extra={
          <div className="sync-examples">
            <span>{t('sync.sourceExamples')}</span>
            {EXAMPLES.map((url) => (
              <Typography.Link
                key={url}
                className="mono"
                data-testid={`sync-example-${url.split(':')[0]}`}
                onClick={() => form.setFieldsValue({ source: url })}
              >
                {url}
              </Typography.Link>
            ))}
          </div>
        }
      >
        <Input className="mono" autoComplete="off" spellCheck={false} placeholder={EXAMPLES[0]} data-testid="sync-form-source" />
      </Form.Item>
      <div className="form-row">
        <Form.Item name="namespace" label={t('sync.targetNamespace')} extra={t('sync.targetNamespaceHint')} style={{ flex: 3 }}>
          <Select
            data-testid="sync-form-namespace"
            allowClear
            showSearch
            optionFilterProp="search"
            loading={namespaces.loading}
            placeholder="public"
            options={namespaceOptions(namespaces.data ?? [], 'sync-ns')}
          />
        </Form.Item>
        <Form.Item name="group" label={t('sync.targetGroup')} extra={t('sync.targetGroupHint')} style={{ flex: 2 }}>
          <Input placeholder="DEFAULT_GROUP" maxLength={128} data-testid="sync-form-group" />
        </Form.Item>
      </div>
      <Form.Item name="services" label={t('sync.filterOptional')} extra={t('sync.filterHint')}>
        <Input className="mono" placeholder="order-*, !*-canary" spellCheck={false} data-testid="sync-form-services" />
      </Form.Item>
      <Form.Item name="dryRun" valuePropName="checked" style={{ marginBottom: 0 }}>
        <Checkbox data-testid="sync-form-dry-run">{t('sync.dryRunLabel')}</Checkbox>
      </Form.Item>
    </>
  );
}

/** When a task last synced, "12 s ago" kept current by its own clock. */
function LastSync({ name, ms }: { name: string; ms: number }) {
  const t = useT();
  const now = useNow(CLOCK_MS);
  return (
    <div className="cell-lines nowrap" data-testid={`sync-last-${name}`}>
      <span>{ago(ms, now, t)}</span>
      <Tooltip title={dateTime(new Date(ms))}>
        <Typography.Text type="secondary" className="when-abs">
          {moment(new Date(ms), new Date(now))}
        </Typography.Text>
      </Tooltip>
    </div>
  );
}

/** The findings of a dry-run task, in its expanded row. */
function DryRunReport({ task, onApply }: { task: SyncTask; onApply(): void }) {
  const t = useT();
  const report = task.status?.dryRun;
  const applyButton = (
    <Button size="small" type="primary" icon={<CloudUploadOutlined />} onClick={onApply} data-testid={`sync-apply-${task.name}`}>
      {t('sync.apply')}
    </Button>
  );
  if (!report) {
    return (
      <Space size="large" wrap>
        <Typography.Text type="secondary" data-testid={`sync-report-${task.name}`}>
          {t('sync.noReport')}
        </Typography.Text>
        {applyButton}
      </Space>
    );
  }
  return (
    <div className="sync-report" data-testid={`sync-report-${task.name}`}>
      <Space size="large" wrap>
        <Typography.Text strong>{t('sync.report')}</Typography.Text>
        <span>
          {t('sync.wouldAdd')}: <Typography.Text strong>{num(report.wouldAdd)}</Typography.Text>
        </span>
        <span>
          {t('sync.wouldUpdate')}: <Typography.Text strong>{num(report.wouldUpdate)}</Typography.Text>
        </span>
        <span>
          {t('sync.wouldRemove')}:{' '}
          <Typography.Text strong type={report.wouldRemove > 0 ? 'warning' : undefined}>
            {num(report.wouldRemove)}
          </Typography.Text>
        </span>
        {applyButton}
      </Space>
      <div className="sync-sample-title">
        <Typography.Text type="secondary">{t('sync.sample', { count: report.sample.length })}</Typography.Text>
      </div>
      {report.sample.length === 0 ? (
        <Typography.Text type="secondary">{t('sync.noSample')}</Typography.Text>
      ) : (
        <ul className="sync-sample mono">
          {report.sample.map((s) => (
            <li key={s}>{s}</li>
          ))}
        </ul>
      )}
    </div>
  );
}
