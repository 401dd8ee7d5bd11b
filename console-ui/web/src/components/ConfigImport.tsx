// Importing a zip of configuration items (Nacos' export format, roster's too) into a
// namespace (admins): a file, what to do with items that exist already, then the
// server's verdict in the dialog — how many were imported and skipped, or its refusal
// verbatim (an invalid item, 400; existing items under ABORT, 409; both name the items).
// The server checks every item before writing any, so a refusal imported nothing.
import { Alert, Button, Modal, Radio, Space, Typography, Upload } from 'antd';
import { InboxOutlined, UploadOutlined } from '@ant-design/icons';
import { useEffect, useState } from 'react';
import type { ConfigImportResult } from '../api';
import { useT, type MessageKey } from '../i18n';
import { errorMessage } from '../format';
import { IMPORT_POLICIES, importConfigs, type ImportPolicy } from '../configs';

/** How many skipped items the result names before it counts the rest. */
const NAMED = 10;

const POLICY_TEXT: Record<ImportPolicy, [MessageKey, MessageKey]> = {
  ABORT: ['cfg.policy.ABORT', 'cfg.policy.ABORT.hint'],
  SKIP: ['cfg.policy.SKIP', 'cfg.policy.SKIP.hint'],
  OVERWRITE: ['cfg.policy.OVERWRITE', 'cfg.policy.OVERWRITE.hint'],
};

interface Props {
  open: boolean;
  namespaceId: string;
  onClose(): void;
  /** after an import went through (the list reloads) */
  onImported(): void;
}

export function ConfigImport({ open, namespaceId, onClose, onImported }: Props) {
  const t = useT();
  const [file, setFile] = useState<File | null>(null);
  const [policy, setPolicy] = useState<ImportPolicy>('ABORT');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [result, setResult] = useState<ConfigImportResult | null>(null);

  useEffect(() => {
    if (!open) return;
    setFile(null);
    setPolicy('ABORT');
    setBusy(false);
    setError(null);
    setResult(null);
  }, [open]);

  const submit = async () => {
    if (!file) return;
    setBusy(true);
    setError(null);
    try {
      const r = await importConfigs(namespaceId, file, policy);
      setResult(r);
      onImported();
    } catch (e) {
      setError(errorMessage(e, t));
    }
    setBusy(false);
  };

  const skipped = result?.skipData ?? [];
  const footer = result
    ? [
        <Button key="close" type="primary" data-testid="cfg-import-close" onClick={onClose}>
          {t('common.close')}
        </Button>,
      ]
    : [
        <Button key="cancel" data-testid="cfg-import-cancel" onClick={onClose} disabled={busy}>
          {t('common.cancel')}
        </Button>,
        <Button
          key="ok"
          type="primary"
          icon={<UploadOutlined />}
          disabled={!file}
          loading={busy}
          data-testid="cfg-import-submit"
          onClick={submit}
        >
          {t('cfg.import')}
        </Button>,
      ];

  return (
    <Modal
      open={open}
      title={t('cfg.importTitle', { namespace: namespaceId })}
      width={600}
      onCancel={busy ? undefined : onClose}
      maskClosable={false}
      destroyOnHidden
      footer={footer}
    >
      <div data-testid="cfg-import">
        <Typography.Paragraph type="secondary">{t('cfg.importHint')}</Typography.Paragraph>
        {/* aria-disabled: the greyed-out drop zone says so (axe then skips its contrast) */}
        <div data-testid="cfg-import-file" aria-disabled={busy || result !== null ? true : undefined}>
          <Upload.Dragger
            accept=".zip,application/zip"
            maxCount={1}
            disabled={busy || result !== null}
            fileList={file ? [{ uid: 'archive', name: file.name, size: file.size, status: 'done' }] : []}
            beforeUpload={(f) => {
              setFile(f);
              setError(null);
              // kept here, sent on Import
              return false;
            }}
            onRemove={() => {
              setFile(null);
              setError(null);
            }}
          >
            <p className="ant-upload-drag-icon">
              <InboxOutlined />
            </p>
            <p className="ant-upload-text">{t('cfg.importPick')}</p>
          </Upload.Dragger>
        </div>
        <div className="cfg-import-policy">
          <Typography.Text strong>{t('cfg.importPolicy')}</Typography.Text>
          <Radio.Group
            value={policy}
            disabled={busy || result !== null}
            onChange={(e) => {
              setPolicy(e.target.value as ImportPolicy);
              setError(null);
            }}
          >
            <Space direction="vertical" size={6}>
              {IMPORT_POLICIES.map((p) => (
                <Radio key={p} value={p} data-testid={`cfg-import-policy-${p}`}>
                  <span className="cfg-policy-name">{t(POLICY_TEXT[p][0])}</span>
                  <Typography.Text type="secondary">{t(POLICY_TEXT[p][1])}</Typography.Text>
                </Radio>
              ))}
            </Space>
          </Radio.Group>
        </div>
        {result && (
          <Alert
            type="success"
            showIcon
            data-testid="cfg-import-result"
            message={t('cfg.imported', { imported: result.succCount, skipped: result.skipCount })}
            description={
              skipped.length > 0
                ? t(skipped.length > NAMED ? 'cfg.importSkippedMore' : 'cfg.importSkipped', {
                    items: skipped
                      .slice(0, NAMED)
                      .map((i) => `${i.group}/${i.dataId}`)
                      .join(', '),
                    count: skipped.length - NAMED,
                  })
                : undefined
            }
          />
        )}
        {error && <Alert type="error" showIcon message={error} data-testid="cfg-import-error" />}
      </div>
    </Modal>
  );
}
