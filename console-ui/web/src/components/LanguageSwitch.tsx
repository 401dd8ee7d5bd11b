import { Segmented, Tooltip } from 'antd';
import { useI18n, type Lang } from '../i18n';

export function LanguageSwitch() {
  const { lang, setLang, t } = useI18n();
  return (
    <Tooltip title={t('lang.label')} placement="bottom">
      <Segmented<Lang>
        size="small"
        value={lang}
        onChange={(v) => setLang(v)}
        data-testid="lang-switch"
        options={[
          { value: 'en', label: <span data-testid="lang-en">English</span> },
          { value: 'zh', label: <span data-testid="lang-zh">中文</span> },
        ]}
      />
    </Tooltip>
  );
}
