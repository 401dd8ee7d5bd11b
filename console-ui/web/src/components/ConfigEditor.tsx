// The create / edit dialog of a configuration item. Editing opens the stored version;
// "Publish" first shows the line diff from it to the edited content, then publishes
// with `casMd5` = the md5 opened, so a change made meanwhile (by anyone, anywhere) is
// refused with a 409 shown here, never overwritten. "Compare with the current version"
// then takes the newer version as the base, keeping the edits. A stored item's gray
// releases (beta, tag versions) are a tab of their own (`ConfigGray.tsx`).
import { Alert, App, Button, Form, Input, Modal, Select, Skeleton, Tabs, Typography } from 'antd';
import { useEffect, useState, type ReactNode } from 'react';
import type { ConfigDetail } from '../api';
import { useT } from '../i18n';
import { dateTime, errorMessage } from '../format';
import {
  CONFIG_TYPES,
  DEFAULT_GROUP,
  contentRules,
  dataIdRules,
  fetchConfig,
  groupRules,
  instant,
  isConflict,
  normalizeTags,
  publishConfig,
  tagsRules,
  type ConfigFields,
  type ConfigRef,
} from '../configs';
import { LineDiff } from './LineDiff';
import { useConfigGray } from './ConfigGray';

/** What the dialog opens: a new item, or a stored one. */
export type EditorTarget = { mode: 'create' } | { mode: 'edit'; group: string; dataId: string };

interface Values {
  dataId: string;
  group: string;
  type: string;
  appName?: string;
  desc?: string;
  tags?: string;
  content: string;
}

function fieldsOf(v: Values): ConfigFields {
  return {
    content: v.content,
    type: v.type || 'text',
    appName: (v.appName ?? '').trim(),
    desc: (v.desc ?? '').trim(),
    tags: normalizeTags(v.tags),
  };
}

function valuesOf(d: ConfigDetail): Values {
  return {
    dataId: d.dataId,
    group: d.group,
    type: d.type || 'text',
    appName: d.appName ?? '',
    desc: d.desc ?? '',
    tags: d.configTags ?? '',
    content: d.content,
  };
}

interface Props {
  open: boolean;
  namespaceId: string;
  target: EditorTarget | undefined;
  onClose(): void;
  /** after a publication (the list reloads) */
  onPublished(): void;
}

export function ConfigEditor({ open, namespaceId, target, onClose, onPublished }: Props) {
  const t = useT();
  const { message } = App.useApp();
  const [form] = Form.useForm<Values>();
  const creating = target?.mode === 'create';
  /** the stored version edited (null while creating; undefined while it loads) */
  const [base, setBase] = useState<ConfigDetail | null | undefined>(undefined);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [phase, setPhase] = useState<'edit' | 'review'>('edit');
  const [draft, setDraft] = useState<Values | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [conflict, setConflict] = useState(false);
  const [tab, setTab] = useState<'content' | 'gray'>('content');

  const ref = (v?: { group: string; dataId: string }): ConfigRef | null => {
    if (v) return { namespaceId, group: v.group.trim() || DEFAULT_GROUP, dataId: v.dataId.trim() };
    if (target?.mode === 'edit') return { namespaceId, group: target.group, dataId: target.dataId };
    return null;
  };

  // Each opening starts afresh; editing loads the stored version.
  useEffect(() => {
    if (!open || !target) return;
    setPhase('edit');
    setDraft(null);
    setBusy(false);
    setError(null);
    setConflict(false);
    setLoadError(null);
    setTab('content');
    if (target.mode === 'create') {
      setBase(null);
      return;
    }
    setBase(undefined);
    let live = true;
    fetchConfig({ namespaceId, group: target.group, dataId: target.dataId })
      .then((d) => {
        if (!live) return;
        if (d) setBase(d);
        else setLoadError(t('cfg.gone', { dataId: target.dataId }));
      })
      .catch((e) => live && setLoadError(errorMessage(e, t)));
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [open, target, namespaceId]);

  const run = async (fn: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (e) {
      if (isConflict(e)) {
        setConflict(true);
        setError(t('cfg.conflict', { message: errorMessage(e, t) }));
      } else setError(errorMessage(e, t));
    }
    setBusy(false);
  };

  // Create: publish at once (refused when the item exists). Edit: review the diff first.
  const submit = async () => {
    let v: Values;
    try {
      v = await form.validateFields();
    } catch {
      return; // the form shows what is wrong
    }
    if (!creating) {
      setDraft(v);
      setError(null);
      setPhase('review');
      return;
    }
    const at = ref(v)!;
    await run(async () => {
      if (await fetchConfig(at)) throw new Error(t('cfg.exists', { dataId: at.dataId, group: at.group }));
      await publishConfig(at, fieldsOf(v));
      message.success(t('cfg.created', { dataId: at.dataId }));
      onClose();
      onPublished();
    });
  };

  const publish = () =>
    run(async () => {
      if (!draft || !base) return;
      await publishConfig(ref()!, fieldsOf(draft), base.md5);
      message.success(t('cfg.published', { dataId: base.dataId }));
      onClose();
      onPublished();
    });

  // After a 409: the version stored now becomes the base; the edits stay.
  const rebase = () =>
    run(async () => {
      const latest = await fetchConfig(ref()!);
      if (!latest) throw new Error(t('cfg.gone', { dataId: ref()!.dataId }));
      setBase(latest);
      setConflict(false);
    });

  // A promotion in the gray tab published the formal content: it becomes the base, and
  // the form shows it unless it holds edits (publishing those then meets the 409).
  const formalChanged = () => {
    onPublished();
    const at = ref();
    if (!at) return;
    void fetchConfig(at)
      .then((latest) => {
        if (!latest) return;
        setBase(latest);
        if (!form.isFieldsTouched()) form.setFieldsValue(valuesOf(latest));
      })
      .catch(() => undefined);
  };
  const gray = useConfigGray({
    item: target?.mode === 'edit' ? ref() : null,
    active: open && !creating && tab === 'gray',
    onClose,
    onFormalChanged: formalChanged,
  });
  const onGray = !creating && !loadError && tab === 'gray';

  let title: ReactNode = creating ? t('cfg.create') : t('cfg.edit', { dataId: target?.mode === 'edit' ? target.dataId : '' });
  if (phase === 'review') title = t('cfg.reviewTitle', { dataId: base?.dataId ?? '' });
  if (onGray) title = gray.title;

  let footer: ReactNode[];
  if (onGray) {
    footer = gray.footer;
  } else if (loadError) {
    footer = [
      <Button key="close" data-testid="cfg-form-cancel" onClick={onClose}>
        {t('common.cancel')}
      </Button>,
    ];
  } else if (phase === 'review') {
    footer = [
      <Button key="back" data-testid="cfg-form-back" onClick={() => setPhase('edit')} disabled={busy}>
        {t('cfg.backToEdit')}
      </Button>,
      conflict && (
        <Button key="rebase" data-testid="cfg-form-rebase" onClick={rebase} loading={busy}>
          {t('cfg.rebase')}
        </Button>
      ),
      <Button key="ok" type="primary" data-testid="cfg-form-publish" onClick={publish} loading={busy} disabled={conflict}>
        {t('cfg.confirmPublish')}
      </Button>,
    ];
  } else {
    footer = [
      <Button key="cancel" data-testid="cfg-form-cancel" onClick={onClose} disabled={busy}>
        {t('common.cancel')}
      </Button>,
      <Button key="ok" type="primary" data-testid="cfg-form-submit" onClick={submit} loading={busy} disabled={base === undefined}>
        {t('cfg.publish')}
      </Button>,
    ];
  }

  const ready = creating || base;
  const content = (
    <>
      <Form<Values>
        form={form}
        layout="vertical"
        preserve={false}
        initialValues={base ? valuesOf(base) : { group: DEFAULT_GROUP, type: 'text', content: '' }}
        style={phase === 'review' ? { display: 'none' } : undefined}
        data-testid="cfg-form-form"
      >
        <ConfigFormFields creating={creating} stored={base ?? undefined} />
      </Form>
      {phase === 'review' && draft && base && <Review base={base} draft={draft} />}
      {error && <Alert type="error" showIcon message={error} data-testid="cfg-form-error" style={{ marginTop: 12 }} />}
    </>
  );
  return (
    <Modal
      open={open}
      title={title}
      width={phase === 'review' ? 960 : 820}
      onCancel={busy || gray.busy ? undefined : onClose}
      maskClosable={false}
      destroyOnHidden
      footer={footer}
    >
      <div data-testid="cfg-editor" data-phase={phase} data-tab={creating ? 'content' : tab}>
        {loadError ? (
          <Alert type="error" showIcon message={loadError} data-testid="cfg-form-error" />
        ) : !ready ? (
          <Skeleton active />
        ) : creating ? (
          content
        ) : (
          // the tabs stay while reviewing, publishing a gray version or promoting one, out
          // of sight: those belong to their tab
          <Tabs
            activeKey={phase === 'review' ? 'content' : tab}
            onChange={(k) => setTab(k === 'gray' ? 'gray' : 'content')}
            tabBarStyle={phase === 'review' || (tab === 'gray' && !gray.listing) ? { display: 'none' } : undefined}
            items={[
              { key: 'content', label: <span data-testid="cfg-tab-content">{t('gray.tabContent')}</span>, children: content },
              { key: 'gray', label: <span data-testid="cfg-tab-gray">{t('gray.tab')}</span>, children: gray.body },
            ]}
          />
        )}
      </div>
    </Modal>
  );
}

function ConfigFormFields({ creating, stored }: { creating: boolean; stored?: ConfigDetail }) {
  const t = useT();
  const form = Form.useFormInstance<Values>();
  // The form instance outlives each opening, and a new Form merges its initial values
  // under what the last opening left: start from this opening's own.
  useEffect(() => form.resetFields(), [form]);
  // a format the server holds that the list does not name stays selectable
  const types = stored?.type && !CONFIG_TYPES.includes(stored.type) ? [...CONFIG_TYPES, stored.type] : CONFIG_TYPES;
  return (
    <>
      <div className="form-row">
        <Form.Item name="dataId" label={t('cfg.dataId')} style={{ flex: 3 }} rules={creating ? dataIdRules(t) : []}>
          <Input
            className="mono"
            disabled={!creating}
            autoFocus={creating}
            autoComplete="off"
            spellCheck={false}
            maxLength={255}
            placeholder="order-service.yaml"
            data-testid="cfg-form-data-id"
          />
        </Form.Item>
        <Form.Item name="group" label={t('cfg.group')} style={{ flex: 2 }} rules={creating ? groupRules(t) : []}>
          <Input
            className="mono"
            disabled={!creating}
            autoComplete="off"
            spellCheck={false}
            maxLength={128}
            placeholder={DEFAULT_GROUP}
            data-testid="cfg-form-group"
          />
        </Form.Item>
      </div>
      <div className="form-row">
        <Form.Item name="type" label={t('cfg.type')} style={{ width: 180, flex: 'none' }}>
          <Select
            data-testid="cfg-form-type"
            options={types.map((ty) => ({ value: ty, label: <span data-testid={`cfg-form-type-option-${ty}`}>{ty}</span> }))}
            onChange={() => form.getFieldValue('content') && void form.validateFields(['content'])}
          />
        </Form.Item>
        <Form.Item name="appName" label={t('cfg.app')} style={{ flex: 1 }}>
          <Input autoComplete="off" maxLength={128} data-testid="cfg-form-app" />
        </Form.Item>
        <Form.Item name="tags" label={t('cfg.tags')} style={{ flex: 1 }} rules={tagsRules(t)} tooltip={t('cfg.tagsHint')}>
          <Input autoComplete="off" placeholder="prod, shop" data-testid="cfg-form-tags" />
        </Form.Item>
      </div>
      <Form.Item name="desc" label={t('cfg.desc')}>
        <Input autoComplete="off" maxLength={256} data-testid="cfg-form-desc" />
      </Form.Item>
      <Form.Item
        name="content"
        label={t('cfg.content')}
        rules={contentRules(t, () => form.getFieldValue('type'))}
        style={{ marginBottom: 0 }}
      >
        <Input.TextArea
          className="mono config-textarea"
          autoSize={{ minRows: 12, maxRows: 16 }}
          spellCheck={false}
          data-testid="cfg-form-content"
        />
      </Form.Item>
    </>
  );
}

/** What publishing changes: the content's line diff and the other fields that differ. */
function Review({ base, draft }: { base: ConfigDetail; draft: Values }) {
  const t = useT();
  const next = fieldsOf(draft);
  const was: ConfigFields = {
    content: base.content,
    type: base.type || 'text',
    appName: base.appName ?? '',
    desc: base.desc ?? '',
    tags: normalizeTags(base.configTags),
  };
  const changed = (['type', 'appName', 'desc', 'tags'] as const).filter((k) => was[k] !== next[k]);
  const label = { type: t('cfg.type'), appName: t('cfg.app'), desc: t('cfg.desc'), tags: t('cfg.tags') };
  const modified = instant(base.modifyTime ?? base.lastModifiedTime);
  return (
    <>
      <Typography.Paragraph type="secondary">{t('cfg.reviewHint')}</Typography.Paragraph>
      {changed.length > 0 && (
        <div className="cfg-meta-changes" data-testid="cfg-meta-changes">
          {changed.map((k) => (
            <div key={k}>
              <Typography.Text strong>{label[k]}</Typography.Text>{' '}
              <Typography.Text delete type="secondary">
                {was[k] || '—'}
              </Typography.Text>
              {' → '}
              <Typography.Text>{next[k] || '—'}</Typography.Text>
            </div>
          ))}
        </div>
      )}
      <LineDiff
        testid="cfg-diff"
        before={base.content}
        after={next.content}
        beforeLabel={modified ? t('cfg.diffStoredAt', { time: dateTime(modified) }) : t('cfg.diffStored')}
        afterLabel={t('cfg.diffEdited')}
      />
    </>
  );
}
