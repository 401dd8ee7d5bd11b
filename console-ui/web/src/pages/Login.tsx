import { Alert, Button, Card, Form, Input, Typography } from 'antd';
import { LockOutlined, UserOutlined } from '@ant-design/icons';
import { useEffect, useState } from 'react';
import { useAuth } from '../auth';
import { useT } from '../i18n';
import { errorMessage } from '../format';
import { ApiError } from '../api';
import { LanguageSwitch } from '../components/LanguageSwitch';

interface Values {
  username: string;
  password: string;
}

export function LoginPage() {
  const t = useT();
  const { login, notice } = useAuth();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    document.title = `${t('login.title')} · roster`;
  }, [t]);

  const submit = async (v: Values) => {
    setBusy(true);
    setError(null);
    try {
      await login(v.username.trim(), v.password);
    } catch (e) {
      // The server does not say which of the two was wrong (so as not to reveal which
      // users exist): neither does the console.
      setError(e instanceof ApiError && e.status === 403 ? t('login.badCredentials') : errorMessage(e, t));
      setBusy(false);
    }
  };

  return (
    <div className="login-page">
      <div className="login-lang">
        <LanguageSwitch />
      </div>
      <Card className="login-card" variant="borderless">
        <div className="login-brand">
          <span className="brand-mark brand-mark-lg">r</span>
          <div>
            <Typography.Title level={3} style={{ margin: 0 }}>
              {t('login.title')}
            </Typography.Title>
            <Typography.Text type="secondary">{t('login.subtitle')}</Typography.Text>
          </div>
        </div>
        {notice === 'expired' && !error && (
          <Alert type="warning" showIcon message={t('login.expired')} data-testid="login-expired" style={{ marginBottom: 16 }} />
        )}
        {error && (
          <Alert
            type="error"
            showIcon
            message={t('login.failed')}
            description={error}
            data-testid="login-error"
            style={{ marginBottom: 16 }}
          />
        )}
        <Form<Values> layout="vertical" onFinish={submit} requiredMark={false} size="large">
          <Form.Item
            name="username"
            label={t('login.username')}
            rules={[{ required: true, whitespace: true, message: t('login.usernameRequired') }]}
          >
            <Input prefix={<UserOutlined />} autoComplete="username" autoFocus data-testid="login-username" />
          </Form.Item>
          <Form.Item name="password" label={t('login.password')} rules={[{ required: true, message: t('login.passwordRequired') }]}>
            <Input.Password prefix={<LockOutlined />} autoComplete="current-password" data-testid="login-password" />
          </Form.Item>
          <Button type="primary" htmlType="submit" block loading={busy} data-testid="login-submit">
            {t('login.submit')}
          </Button>
        </Form>
        <Typography.Paragraph type="secondary" className="login-first" data-testid="login-first-password">
          {t('login.firstPassword.before')}
          <Typography.Text code>{'<data-dir>/initial-admin-password'}</Typography.Text>
          {t('login.firstPassword.middle')}
          <Typography.Text code>./roster-data</Typography.Text>
          {t('login.firstPassword.or')}
          <Typography.Text code>ROSTER_ADMIN_PASSWORD</Typography.Text>
          {t('login.firstPassword.after')}
        </Typography.Paragraph>
      </Card>
    </div>
  );
}
