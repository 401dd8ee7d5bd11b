import { Alert, Button, Form, Modal, type FormInstance } from 'antd';
import { useEffect, useState, type ReactNode } from 'react';
import { useT } from '../i18n';
import { errorMessage } from '../format';

interface Props<V> {
  open: boolean;
  title: ReactNode;
  /** prefix of the data-testid of the form's buttons: `${testid}-submit`, `${testid}-cancel` */
  testid: string;
  form: FormInstance<V>;
  initialValues?: Partial<V>;
  okText?: ReactNode;
  danger?: boolean;
  width?: number;
  onCancel(): void;
  /** resolves to close the dialog; throws to show the error inside it */
  onSubmit(values: V): Promise<void>;
  children: ReactNode;
}

/** A dialog around a form. Server errors are shown inside it, verbatim. */
export function FormModal<V extends object>(props: Props<V>) {
  const t = useT();
  const { open, form, onSubmit, onCancel } = props;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (open) {
      setError(null);
      setBusy(false);
    }
  }, [open]);

  const submit = async () => {
    let values: V;
    try {
      values = await form.validateFields();
    } catch {
      return; // the form shows what is wrong
    }
    setBusy(true);
    setError(null);
    try {
      await onSubmit(values);
    } catch (e) {
      setError(errorMessage(e, t));
      setBusy(false);
      return;
    }
    setBusy(false);
  };

  return (
    <Modal
      open={open}
      title={props.title}
      width={props.width ?? 520}
      onCancel={busy ? undefined : onCancel}
      maskClosable={false}
      destroyOnHidden
      footer={[
        <Button key="cancel" data-testid={`${props.testid}-cancel`} onClick={onCancel} disabled={busy}>
          {t('common.cancel')}
        </Button>,
        <Button
          key="ok"
          type="primary"
          danger={props.danger}
          data-testid={`${props.testid}-submit`}
          loading={busy}
          onClick={submit}
        >
          {props.okText ?? t('common.save')}
        </Button>,
      ]}
    >
      <Form
        form={form}
        layout="vertical"
        initialValues={props.initialValues}
        preserve={false}
        onFinish={submit}
        data-testid={`${props.testid}-form`}
      >
        {props.children}
        {/* Enter in a field submits */}
        <button type="submit" hidden aria-hidden />
      </Form>
      {error && (
        <Alert type="error" showIcon message={error} data-testid={`${props.testid}-error`} style={{ marginTop: 4 }} />
      )}
    </Modal>
  );
}

interface ConfirmProps {
  open: boolean;
  title: ReactNode;
  body: ReactNode;
  okText?: ReactNode;
  onCancel(): void;
  onConfirm(): Promise<void>;
}

/** A destructive-action confirmation; a refusal from the server stays visible in it. */
export function ConfirmDialog(props: ConfirmProps) {
  const t = useT();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (props.open) {
      setError(null);
      setBusy(false);
    }
  }, [props.open]);

  const confirm = async () => {
    setBusy(true);
    setError(null);
    try {
      await props.onConfirm();
    } catch (e) {
      setError(errorMessage(e, t));
    }
    setBusy(false);
  };

  return (
    <Modal
      open={props.open}
      title={props.title}
      onCancel={busy ? undefined : props.onCancel}
      destroyOnHidden
      width={460}
      footer={[
        <Button key="cancel" data-testid="confirm-cancel" onClick={props.onCancel} disabled={busy}>
          {t('common.cancel')}
        </Button>,
        <Button key="ok" type="primary" danger data-testid="confirm-ok" loading={busy} onClick={confirm}>
          {props.okText ?? t('common.delete')}
        </Button>,
      ]}
    >
      <div data-testid="confirm-dialog">{props.body}</div>
      {error && (
        <Alert type="error" showIcon message={error} data-testid="confirm-error" style={{ marginTop: 16 }} />
      )}
    </Modal>
  );
}
