// The line diff of two versions of a text: removed lines red, added green, unchanged
// runs folded to a few lines of context around each change (a click unfolds them).
import { Alert, Space, Tag, Typography } from 'antd';
import { useEffect, useMemo, useState, type ReactNode } from 'react';
import { useT } from '../i18n';
import { diffLines, fold, missingEol, type DiffLine } from '../diff';

interface Props {
  before: string;
  after: string;
  /** what the two sides are, for the legend */
  beforeLabel: ReactNode;
  afterLabel: ReactNode;
  testid: string;
}

export function LineDiff({ before, after, beforeLabel, afterLabel, testid }: Props) {
  const t = useT();
  const diff = useMemo(() => diffLines(before, after), [before, after]);
  const hunks = useMemo(() => fold(diff.lines), [diff]);
  const [unfolded, setUnfolded] = useState<Set<number>>(() => new Set());
  useEffect(() => setUnfolded(new Set()), [hunks]);
  const unchanged = diff.added === 0 && diff.removed === 0;

  return (
    <div data-testid={testid} data-added={diff.added} data-removed={diff.removed}>
      <div className="diff-head">
        <Space size={6} wrap>
          <Tag color="red" bordered={false} className="diff-count">
            −{diff.removed}
          </Tag>
          <Typography.Text type="secondary">{beforeLabel}</Typography.Text>
          <Tag color="green" bordered={false} className="diff-count">
            +{diff.added}
          </Tag>
          <Typography.Text type="secondary">{afterLabel}</Typography.Text>
        </Space>
      </div>
      {unchanged ? (
        <Alert type="info" showIcon message={t('diff.same')} data-testid={`${testid}-same`} />
      ) : (
        <>
          {diff.approximate && <Alert type="warning" showIcon banner message={t('diff.approximate')} style={{ marginBottom: 8 }} />}
          <div className="diff" role="table">
            {hunks.map((h, i) =>
              h.kind === 'lines' || unfolded.has(i) ? (
                h.lines.map((l, k) => <Line key={`${i}-${k}`} line={l} />)
              ) : (
                // a row of its own: a table's children are rows, a row's are cells
                <div key={i} role="row">
                  <div role="cell">
                    <button type="button" className="diff-gap" onClick={() => setUnfolded((s) => new Set(s).add(i))}>
                      ⋯ {t('diff.gap', { count: h.lines.length })}
                    </button>
                  </div>
                </div>
              ),
            )}
          </div>
        </>
      )}
    </div>
  );
}

const SIGN = { same: ' ', add: '+', del: '−' } as const;

function Line({ line }: { line: DiffLine }) {
  const t = useT();
  const noEol = missingEol(line.text);
  const text = noEol ? line.text.slice(0, -1) : line.text;
  return (
    <div className={`diff-line diff-${line.kind}`} data-kind={line.kind} role="row">
      <span className="diff-no" role="cell">
        {line.oldNo ?? ''}
      </span>
      <span className="diff-no" role="cell">
        {line.newNo ?? ''}
      </span>
      <span className="diff-sign" role="cell">
        {SIGN[line.kind]}
      </span>
      <span className="diff-text" role="cell">
        {text === '' && !noEol ? '\u200b' : text}
        {noEol && <span className="diff-no-eol">{t('diff.noEol')}</span>}
      </span>
    </div>
  );
}
