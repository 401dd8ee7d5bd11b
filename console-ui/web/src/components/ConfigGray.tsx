// The gray releases of a configuration item, a tab of its editor: the live beta (for
// listed client IPs) and tag versions (for clients carrying a tag), each with its content
// and its changes from the formal content. Publish a beta or a tag version (editing one
// publishes over the version opened: a change made meanwhile is refused, not
// overwritten); stop the beta or remove a tag version; promote one (Nacos' "promote"):
// its content becomes the formal content — published over the formal version shown, so
// a change made meanwhile is refused — and the gray version goes.
//
// `useConfigGray` answers the tab's body and the dialog's footer and title while the tab
// shows, as the editor lays them out.
import { Alert, App, Button, Card, Form, Input, Segmented, Skeleton, Space, Tag, Typography } from 'antd';
import { ArrowUpOutlined, DeleteOutlined, EditOutlined, PlusOutlined, ReloadOutlined, StopOutlined } from '@ant-design/icons';
import { useEffect, useState, type ReactNode } from 'react';
import type { ConfigDetail } from '../api';
import { useT } from '../i18n';
import { useDialog, useResource } from '../hooks';
import { dateTime, errorMessage } from '../format';
import { contentRules, fetchConfig, isConflict, normalizeTags, publishConfig, type ConfigRef } from '../configs';
import {
  MAX_GRAYS,
  betaIpsRules,
  fetchBeta,
  fetchTagVersions,
  grayTagRules,
  publishGray,
  removeGray,
  splitIps,
  type GrayTarget,
  type GrayVersion,
} from '../grays';
import { ConfirmDialog } from './FormModal';
import { LoadError } from './bits';
import { LineDiff } from './LineDiff';

/** What the tab shows: the gray versions, a publication, or the promotion of one. */
type Pane =
  | { kind: 'list' }
  | { kind: 'publish'; target: 'beta' | 'tag'; from?: GrayVersion }
  | { kind: 'promote'; gray: GrayVersion };

interface Values {
  ips?: string;
  tag?: string;
  content: string;
}

export interface GrayTab {
  body: ReactNode;
  footer: ReactNode[];
  title: string;
  /** the list shows (not a publication or a promotion) */
  listing: boolean;
  /** a write is under way */
  busy: boolean;
}

interface Options {
  /** the item; null while creating one */
  item: ConfigRef | null;
  /** the dialog is open on this tab */
  active: boolean;
  onClose(): void;
  /** after a promotion changed the formal content */
  onFormalChanged(): void;
}

/** Where `g` is for, in words: `beta` or `tag canary`. */
function useGrayLabel() {
  const t = useT();
  return (g: Pick<GrayVersion, 'kind' | 'tag'>) => (g.kind === 'beta' ? t('gray.beta') : t('gray.tagNamed', { tag: g.tag }));
}

export function useConfigGray({ item, active, onClose, onFormalChanged }: Options): GrayTab {
  const t = useT();
  const label = useGrayLabel();
  const { message } = App.useApp();
  const [form] = Form.useForm<Values>();
  const [pane, setPane] = useState<Pane>({ kind: 'list' });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const remove = useDialog<GrayVersion>();
  const itemKey = item ? `${item.namespaceId}|${item.group}|${item.dataId}` : '';
  const on = active && item !== null;
  const formal = useResource(async () => (on && item ? fetchConfig(item) : undefined), [on, itemKey]);
  const beta = useResource(async () => (on && item ? fetchBeta(item) : undefined), [on, itemKey]);
  const tags = useResource(async () => (on && item ? fetchTagVersions(item) : undefined), [on, itemKey]);

  // Each showing of the tab starts on the list.
  useEffect(() => {
    if (on) setPane({ kind: 'list' });
  }, [on, itemKey]);
  useEffect(() => {
    setBusy(false);
    setError(null);
  }, [pane]);

  const reload = () => Promise.all([formal.reload({ silent: true }), beta.reload({ silent: true }), tags.reload({ silent: true })]);
  const count = (beta.data ? 1 : 0) + (tags.data?.length ?? 0);

  const run = async (fn: () => Promise<void>, conflict?: (message: string) => string) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (e) {
      const text = errorMessage(e, t);
      setError(conflict && isConflict(e) ? conflict(text) : text);
    }
    setBusy(false);
  };

  const publish = async () => {
    if (!item || pane.kind !== 'publish') return;
    let v: Values;
    try {
      v = await form.validateFields();
    } catch {
      return; // the form shows what is wrong
    }
    const target: GrayTarget = pane.target === 'beta' ? { kind: 'beta', ips: splitIps(v.ips) } : { kind: 'tag', tag: (v.tag ?? '').trim() };
    const from = pane.from;
    await run(
      async () => {
        // a new tag version never replaces one of the same tag unseen
        if (!from && target.kind === 'tag' && (await fetchTagVersions(item)).some((g) => g.tag === target.tag)) {
          throw new Error(t('gray.tagExists', { tag: target.tag }));
        }
        await publishGray(item, target, v.content, from?.md5);
        message.success(t('gray.published', { gray: label(target.kind === 'beta' ? { kind: 'beta', tag: '' } : target) }));
        await reload();
        setPane({ kind: 'list' });
      },
      // with the version opened: it changed; without: the item holds the most it may
      (text) => (from ? t('gray.conflict', { message: text }) : t('gray.tooMany', { max: MAX_GRAYS, message: text })),
    );
  };

  const promote = async () => {
    if (!item || pane.kind !== 'promote') return;
    const g = pane.gray;
    await run(
      async () => {
        const stored = formal.data;
        if (!stored) throw new Error(t('cfg.gone', { dataId: item.dataId }));
        // the gray version as stored now must be the one reviewed
        const now = g.kind === 'beta' ? await fetchBeta(item) : (await fetchTagVersions(item)).find((x) => x.name === g.name);
        if (!now || now.md5 !== g.md5) throw new Error(t('gray.changed', { gray: label(g) }));
        await publishConfig(item, formalFields(stored, g.content), stored.md5);
        onFormalChanged();
        try {
          await removeGray(item, g);
        } catch (e) {
          await reload();
          throw new Error(t('gray.promotedNotRemoved', { gray: label(g), message: errorMessage(e, t) }));
        }
        message.success(t('gray.promoted', { gray: label(g) }));
        await reload();
        setPane({ kind: 'list' });
      },
      (text) => t('gray.formalConflict', { message: text }),
    );
  };

  const submitRemove = async () => {
    const g = remove.target;
    if (!item || !g) return;
    await removeGray(item, g);
    message.success(t(g.kind === 'beta' ? 'gray.stopped' : 'gray.removed', { gray: label(g) }));
    remove.hide();
    await reload();
  };

  const back = (
    <Button key="back" data-testid="cfg-gray-back" onClick={() => setPane({ kind: 'list' })} disabled={busy}>
      {t('common.back')}
    </Button>
  );
  const close = (
    <Button key="close" data-testid="cfg-gray-close" onClick={onClose} disabled={busy}>
      {t('common.close')}
    </Button>
  );

  let body: ReactNode;
  let footer: ReactNode[];
  let title = t('gray.title', { dataId: item?.dataId ?? '' });
  const loadError = [formal, beta, tags].find((r) => r.error !== undefined && r.data === undefined)?.error;
  const loaded = formal.data !== undefined && beta.data !== undefined && tags.data !== undefined;

  if (pane.kind === 'list') {
    const openPublish = (target: 'beta' | 'tag', from?: GrayVersion) => setPane({ kind: 'publish', target, from });
    const actions = {
      edit: (g: GrayVersion) => openPublish(g.kind, g),
      promote: (g: GrayVersion) => setPane({ kind: 'promote', gray: g }),
      remove: (g: GrayVersion) => remove.show(g),
    };
    const full = count >= MAX_GRAYS;
    if (loadError !== undefined) {
      body = <LoadError error={loadError} onRetry={() => void reload()} />;
    } else if (!loaded) {
      body = <Skeleton active />;
    } else {
      const formalContent = formal.data?.content ?? '';
      body = (
        <>
          <Typography.Paragraph type="secondary">{t('gray.hint')}</Typography.Paragraph>
          <div style={headStyle}>
            <Typography.Text strong>{t('gray.betaTitle')}</Typography.Text>
          </div>
          {beta.data ? (
            <GrayCard gray={beta.data} formal={formalContent} {...actions} />
          ) : (
            <Typography.Paragraph type="secondary" data-testid="cfg-gray-beta-none">
              {t('gray.noBeta')}
            </Typography.Paragraph>
          )}
          <div style={headStyle}>
            <Typography.Text strong>{t('gray.tagsTitle', { count: tags.data?.length ?? 0 })}</Typography.Text>
          </div>
          {tags.data && tags.data.length > 0 ? (
            <Space direction="vertical" size={12} style={{ width: '100%' }}>
              {tags.data.map((g) => (
                <GrayCard key={g.name} gray={g} formal={formalContent} {...actions} />
              ))}
            </Space>
          ) : (
            <Typography.Paragraph type="secondary" data-testid="cfg-gray-tags-none">
              {t('gray.noTags')}
            </Typography.Paragraph>
          )}
          {full && <Alert type="info" showIcon message={t('gray.full', { max: MAX_GRAYS })} style={{ marginTop: 12 }} />}
        </>
      );
    }
    footer = [
      close,
      <Button key="refresh" icon={<ReloadOutlined />} data-testid="cfg-gray-refresh" onClick={() => void reload()}>
        {t('common.refresh')}
      </Button>,
      <Button
        key="tag"
        icon={<PlusOutlined />}
        data-testid="cfg-gray-publish-tag"
        disabled={!loaded || full}
        onClick={() => openPublish('tag')}
      >
        {t('gray.publishTag')}
      </Button>,
      <Button
        key="beta"
        type="primary"
        icon={beta.data ? <EditOutlined /> : <PlusOutlined />}
        data-testid="cfg-gray-publish-beta"
        disabled={!loaded || (full && !beta.data)}
        onClick={() => openPublish('beta', beta.data ?? undefined)}
      >
        {beta.data ? t('gray.editBeta') : t('gray.publishBeta')}
      </Button>,
    ];
  } else if (pane.kind === 'publish') {
    const from = pane.from;
    const isBeta = pane.target === 'beta';
    title = from
      ? t('gray.editTitle', { dataId: item?.dataId ?? '', gray: label(from) })
      : t(isBeta ? 'gray.publishBetaTitle' : 'gray.publishTagTitle', { dataId: item?.dataId ?? '' });
    const initial: Values = {
      ips: from?.ips.join(', ') ?? '',
      tag: from?.tag ?? '',
      content: from?.content ?? formal.data?.content ?? '',
    };
    body = (
      <>
        <Typography.Paragraph type="secondary">{t(isBeta ? 'gray.publishBetaHint' : 'gray.publishTagHint')}</Typography.Paragraph>
        <Form<Values> form={form} layout="vertical" preserve={false} initialValues={initial} data-testid="cfg-gray-form">
          <PublishFields beta={isBeta} editing={!!from} type={formal.data?.type || 'text'} />
        </Form>
      </>
    );
    footer = [
      back,
      <Button key="ok" type="primary" data-testid="cfg-gray-form-submit" loading={busy} onClick={publish}>
        {isBeta ? t('gray.publishBeta') : t('gray.publishTag')}
      </Button>,
    ];
  } else {
    const g = pane.gray;
    title = t('gray.promoteTitle', { dataId: item?.dataId ?? '', gray: label(g) });
    body = (
      <>
        <Typography.Paragraph type="secondary">{t('gray.promoteHint', { gray: label(g) })}</Typography.Paragraph>
        <LineDiff
          testid="cfg-gray-promote-diff"
          before={formal.data?.content ?? ''}
          after={g.content}
          beforeLabel={t('gray.formalContent')}
          afterLabel={label(g)}
        />
      </>
    );
    footer = [
      back,
      <Button
        key="ok"
        type="primary"
        icon={<ArrowUpOutlined />}
        data-testid="cfg-gray-promote-ok"
        loading={busy}
        disabled={!formal.data}
        onClick={promote}
      >
        {t('gray.promote')}
      </Button>,
    ];
  }

  const g = remove.target;
  return {
    title,
    footer,
    listing: pane.kind === 'list',
    busy,
    body: (
      <div data-testid="cfg-gray" data-pane={pane.kind} data-count={loaded ? count : undefined}>
        {body}
        {error && <Alert type="error" showIcon message={error} data-testid="cfg-gray-error" style={{ marginTop: 12 }} />}
        <ConfirmDialog
          open={remove.open}
          title={g ? t(g.kind === 'beta' ? 'gray.stopTitle' : 'gray.removeTitle', { gray: label(g), dataId: item?.dataId ?? '' }) : ''}
          body={g ? t(g.kind === 'beta' ? 'gray.stopBody' : 'gray.removeBody', { gray: label(g), ips: g.ips.join(', ') }) : ''}
          okText={g?.kind === 'beta' ? t('gray.stopBeta') : t('gray.removeTag')}
          onCancel={remove.hide}
          onConfirm={submitRemove}
        />
      </div>
    ),
  };
}

const headStyle = { margin: '8px 0' } as const;

/** The formal fields of `stored`, with `content` instead of its own. */
function formalFields(stored: ConfigDetail, content: string) {
  return {
    content,
    type: stored.type || 'text',
    appName: stored.appName ?? '',
    desc: stored.desc ?? '',
    tags: normalizeTags(stored.configTags),
  };
}

function PublishFields({ beta, editing, type }: { beta: boolean; editing: boolean; type: string }) {
  const t = useT();
  const form = Form.useFormInstance<Values>();
  // The form instance outlives each opening, and a new Form merges its initial values
  // under what the last opening left: start from this opening's own.
  useEffect(() => form.resetFields(), [form]);
  return (
    <>
      {beta ? (
        <Form.Item name="ips" label={t('gray.ips')} rules={betaIpsRules(t)} tooltip={t('gray.ipsHint')}>
          <Input className="mono" autoComplete="off" spellCheck={false} placeholder="192.168.0.10, 192.168.0.11" data-testid="cfg-gray-form-ips" />
        </Form.Item>
      ) : (
        <Form.Item name="tag" label={t('gray.tag')} rules={grayTagRules(t)} tooltip={t('gray.tagHint')}>
          <Input
            className="mono"
            autoComplete="off"
            spellCheck={false}
            maxLength={64}
            disabled={editing}
            placeholder="canary"
            data-testid="cfg-gray-form-tag"
          />
        </Form.Item>
      )}
      <Form.Item name="content" label={t('cfg.content')} rules={contentRules(t, () => type)} style={{ marginBottom: 0 }}>
        <Input.TextArea
          className="mono config-textarea"
          autoSize={{ minRows: 10, maxRows: 14 }}
          spellCheck={false}
          data-testid="cfg-gray-form-content"
        />
      </Form.Item>
    </>
  );
}

interface CardProps {
  gray: GrayVersion;
  /** the formal content, to compare with */
  formal: string;
  edit(g: GrayVersion): void;
  promote(g: GrayVersion): void;
  remove(g: GrayVersion): void;
}

/** A live gray version: who it is for, when it was published, its content or its changes. */
function GrayCard({ gray, formal, edit, promote, remove }: CardProps) {
  const t = useT();
  const label = useGrayLabel();
  const [view, setView] = useState<'content' | 'diff'>('content');
  const id = gray.kind === 'beta' ? 'cfg-gray-beta' : `cfg-gray-tag-${gray.tag}`;
  const who =
    gray.kind === 'beta' ? (
      <Space size={4} wrap>
        <Tag color="orange" bordered={false}>
          {t('gray.beta')}
        </Tag>
        {gray.ips.map((ip) => (
          <Tag key={ip} className="mono" data-testid="cfg-gray-beta-ip">
            {ip}
          </Tag>
        ))}
      </Space>
    ) : (
      <Space size={4}>
        <Tag color="purple" bordered={false}>
          {t('gray.tagKind')}
        </Tag>
        <span className="mono" data-testid="cfg-gray-tag-name">
          {gray.tag}
        </span>
      </Space>
    );
  return (
    <Card
      size="small"
      title={who}
      data-testid={id}
      data-md5={gray.md5}
      extra={
        <Space size={0} className="nowrap">
          <Button type="link" size="small" icon={<EditOutlined />} data-testid={`${id}-edit`} onClick={() => edit(gray)}>
            {t('common.edit')}
          </Button>
          <Button type="link" size="small" icon={<ArrowUpOutlined />} data-testid={`${id}-promote`} onClick={() => promote(gray)}>
            {t('gray.promote')}
          </Button>
          <Button
            type="link"
            size="small"
            danger
            icon={gray.kind === 'beta' ? <StopOutlined /> : <DeleteOutlined />}
            data-testid={`${id}-remove`}
            onClick={() => remove(gray)}
          >
            {gray.kind === 'beta' ? t('gray.stopBeta') : t('gray.removeTag')}
          </Button>
        </Space>
      }
    >
      <div style={{ display: 'flex', alignItems: 'center', gap: 12, flexWrap: 'wrap' }}>
        <Typography.Text type="secondary">
          {t('gray.publishedAt', { time: gray.modified ? dateTime(gray.modified) : '—', user: gray.by || '—' })}
        </Typography.Text>
        <Typography.Text className="mono cfg-md5" type="secondary">
          MD5 {gray.md5}
        </Typography.Text>
        <Segmented<'content' | 'diff'>
          size="small"
          style={{ marginInlineStart: 'auto' }}
          value={view}
          onChange={setView}
          aria-label={label(gray)}
          options={[
            { value: 'content', label: <span data-testid={`${id}-show-content`}>{t('gray.showContent')}</span> },
            { value: 'diff', label: <span data-testid={`${id}-show-diff`}>{t('gray.showDiff')}</span> },
          ]}
        />
      </div>
      {view === 'content' ? (
        <pre className="config-content" data-testid={`${id}-content`}>
          {gray.content}
        </pre>
      ) : (
        <div style={{ marginTop: 12 }}>
          <LineDiff testid={`${id}-diff`} before={formal} after={gray.content} beforeLabel={t('gray.formalContent')} afterLabel={label(gray)} />
        </div>
      )}
    </Card>
  );
}

