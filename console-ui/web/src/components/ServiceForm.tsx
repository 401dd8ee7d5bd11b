import { Form, Input, InputNumber, Select } from 'antd';
import type { Params } from '../api';
import { useT, type Translate } from '../i18n';
import { formatMetadata, metadataRule, parseMetadata } from '../metadata';

export interface ServiceValues {
  serviceName: string;
  groupName: string;
  protectThreshold: number;
  metadata?: string;
  selectorType: string;
  selectorExpression?: string;
}

export function serviceInitial(s?: {
  name: string;
  groupName: string;
  protectThreshold: number;
  metadata?: Record<string, string>;
  selector?: { type: string; expression?: string };
}): Partial<ServiceValues> {
  if (!s) return { groupName: 'DEFAULT_GROUP', protectThreshold: 0, selectorType: 'none', metadata: '' };
  const type = s.selector?.type && s.selector.type !== '' ? s.selector.type : 'none';
  return {
    serviceName: s.name,
    groupName: s.groupName,
    protectThreshold: s.protectThreshold,
    metadata: formatMetadata(s.metadata),
    selectorType: type,
    selectorExpression: s.selector?.expression ?? '',
  };
}

/** The form parameters of POST/PUT /nacos/v1/ns/service. */
export function serviceParams(namespaceId: string, v: ServiceValues, t: Translate, creating: boolean): Params {
  const metadata = parseMetadata(v.metadata ?? '', t);
  const type = v.selectorType || 'none';
  const selector =
    type === 'none' ? (creating ? undefined : JSON.stringify({ type: 'none' })) : JSON.stringify({ type, expression: (v.selectorExpression ?? '').trim() });
  return {
    namespaceId,
    serviceName: v.serviceName.trim(),
    groupName: (v.groupName ?? '').trim() || 'DEFAULT_GROUP',
    protectThreshold: v.protectThreshold ?? 0,
    metadata: JSON.stringify(metadata),
    selector,
  };
}

export function ServiceFormFields({ creating }: { creating: boolean }) {
  const t = useT();
  return (
    <>
      <div className="form-row">
        <Form.Item
          name="serviceName"
          label={t('svc.name')}
          style={{ flex: 3 }}
          rules={[
            { required: true, whitespace: true, message: t('svc.nameRequired') },
            { validator: async (_, v?: string) => { if (v && v.includes('@@')) throw new Error(t('svc.nameInvalid')); } },
          ]}
        >
          <Input disabled={!creating} data-testid="svc-form-name" autoFocus={creating} maxLength={512} />
        </Form.Item>
        <Form.Item name="groupName" label={t('svc.group')} style={{ flex: 2 }}>
          <Input disabled={!creating} data-testid="svc-form-group" placeholder="DEFAULT_GROUP" maxLength={128} />
        </Form.Item>
      </div>
      <Form.Item
        name="protectThreshold"
        label={t('svc.threshold')}
        extra={t('svc.thresholdHint')}
        rules={[{ required: true, message: t('svc.thresholdRequired') }]}
      >
        <InputNumber min={-1} max={1} step={0.05} style={{ width: 160 }} data-testid="svc-form-threshold" />
      </Form.Item>
      <Form.Item name="metadata" label={t('svc.metadata')} extra={t('meta.hint')} rules={[metadataRule(t)]}>
        <Input.TextArea autoSize={{ minRows: 3, maxRows: 10 }} className="mono" data-testid="svc-form-metadata" spellCheck={false} />
      </Form.Item>
      <div className="form-row">
        <Form.Item name="selectorType" label={t('svc.selectorType')} style={{ width: 220, flex: 'none' }}>
          <Select
            data-testid="svc-form-selector-type"
            options={[
              { value: 'none', label: t('svc.selectorNone') },
              { value: 'metadata', label: t('svc.selectorMetadata') },
              { value: 'label', label: t('svc.selectorLabel') },
            ]}
          />
        </Form.Item>
        <Form.Item noStyle shouldUpdate={(a, b) => a.selectorType !== b.selectorType}>
          {({ getFieldValue }) =>
            getFieldValue('selectorType') !== 'none' && (
              <Form.Item
                name="selectorExpression"
                label={t('svc.selectorExpr')}
                style={{ flex: 1 }}
                rules={[{ required: true, whitespace: true, message: t('svc.selectorExprRequired') }]}
                extra={t('svc.selectorExprHint')}
              >
                <Input className="mono" data-testid="svc-form-selector-expr" placeholder="env=prod,zone in (a,b)" />
              </Form.Item>
            )
          }
        </Form.Item>
      </div>
    </>
  );
}
