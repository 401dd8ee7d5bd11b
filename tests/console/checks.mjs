// Checks shared by the console's browser tests: does a page fit the screen with every
// action visible, and does it pass axe-core's accessibility rules.
import fs from 'node:fs';
import { createRequire } from 'node:module';

/** axe-core, evaluated in the page it checks (not a script tag: the console's CSP allows
 * only its own scripts; evaluation through the DevTools protocol is not subject to it). */
const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * What is wrong with the layout of `page` as it is, one sentence each: nothing may
 * scroll sideways (the page, a table), and each visible button outside a dialog lies
 * inside the viewport, is not cut by a container that hides overflow, is not cut to
 * part of its label, and is not covered by something else (a long tag spilling over).
 */
export async function fitProblems(page) {
  return page.evaluate(() => {
    const out = [];
    const vw = document.documentElement.clientWidth;
    const vh = window.innerHeight;
    const name = (el) => (el.dataset.testid || el.innerText || el.getAttribute('aria-label') || el.className || '').toString().trim().slice(0, 40);
    const root = document.documentElement;
    if (root.scrollWidth > root.clientWidth + 1) out.push(`the page scrolls sideways (${root.scrollWidth} > ${root.clientWidth})`);
    for (const el of document.querySelectorAll('.ant-table-content, .ant-table-body, .ant-table-container, .ant-card-body')) {
      if (el.closest('.ant-modal-root') || el.getClientRects().length === 0) continue;
      if (el.scrollWidth > el.clientWidth + 1) {
        const owner = el.closest('[data-testid]');
        out.push(`${el.className.split(' ')[0]} of ${owner ? owner.dataset.testid : 'the page'} scrolls sideways (${el.scrollWidth} > ${el.clientWidth})`);
      }
    }
    const buttons = [...document.querySelectorAll('button, a.ant-btn')].filter(
      (b) => b.getClientRects().length > 0 && !b.closest('.ant-modal-root, .ant-select-dropdown, .ant-picker-dropdown, .ant-tooltip, .ant-popover') && !b.hidden,
    );
    for (const b of buttons) {
      const r = b.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      const label = name(b);
      if (r.left < -0.5 || r.right > vw + 0.5) out.push(`button "${label}" is outside the viewport (${Math.round(r.left)}..${Math.round(r.right)} of ${vw})`);
      if (b.scrollWidth > b.clientWidth + 1) out.push(`button "${label}" shows part of its label (${b.scrollWidth} > ${b.clientWidth})`);
      for (let p = b.parentElement; p && p !== document.body; p = p.parentElement) {
        if (getComputedStyle(p).overflowX === 'visible') continue;
        const pr = p.getBoundingClientRect();
        if (r.left < pr.left - 0.5 || r.right > pr.right + 0.5) {
          out.push(`button "${label}" is cut by ${p.className.toString().split(' ')[0] || p.tagName}`);
          break;
        }
      }
      // covered: what is on top at the button's middle is the button (or a wrapper of a
      // disabled one, which takes no pointer events)
      const cx = (r.left + r.right) / 2;
      const cy = (r.top + r.bottom) / 2;
      if (cy > 0 && cy < vh && cx > 0 && cx < vw) {
        const hit = document.elementFromPoint(cx, cy);
        // a dialog, toast or pop-up on top is not the layout's doing
        const overlay = '.ant-modal-root, .ant-drawer, .ant-message, .ant-notification, .ant-tooltip, .ant-popover, .ant-select-dropdown, .ant-dropdown, .ant-picker-dropdown';
        if (hit && !b.contains(hit) && !hit.contains(b) && !hit.closest(overlay)) out.push(`button "${label}" is covered by ${hit.className.toString().split(' ')[0] || hit.tagName}`);
      }
    }
    // a tag in a table row that reaches into a button of the row
    for (const tr of document.querySelectorAll('tr.ant-table-row')) {
      const rowButtons = [...tr.querySelectorAll('button')].map((b) => b.getBoundingClientRect());
      for (const tag of tr.querySelectorAll('.ant-tag')) {
        const t = tag.getBoundingClientRect();
        if (t.width === 0) continue;
        if (rowButtons.some((b) => t.right > b.left + 0.5 && t.left < b.right - 0.5 && t.bottom > b.top && t.top < b.bottom)) {
          out.push(`tag "${tag.innerText.slice(0, 40)}" overlaps a button of its row`);
        }
      }
    }
    return out;
  });
}

/**
 * axe-core's serious and critical violations on `page` as it is, one sentence per rule
 * with its help text and the first elements it names (a contrast failure with its
 * colours). Toasts and tooltips come and go with timing and are left out, and so are
 * open select lists (antd's own markup); running transitions are waited for (a dialog half faded
 * in, a radio button changing colour: mid-way, their text would fail the contrast rule).
 */
export async function axeProblems(page, { timeout = 10_000 } = {}) {
  // every finite animation and transition over (an endless one, the live badge's pulse,
  // never is)
  await page.waitForFunction(
    () => document.getAnimations().every((a) => a.playState !== 'running' || a.effect?.getTiming().iterations === Infinity),
    null,
    { timeout },
  );
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const result = await window.axe.run(
      // open select lists are antd's: their visible items carry aria-selected without a
      // role (screen readers use the hidden role=listbox copy rc-select keeps beside them).
      // Tooltips come and go with the pointer: one fading in or out after the wait above
      // reads as light grey on lighter grey (white on black at a few per cent opacity;
      // it failed the contrast rule once in CI), while at rest it is white on black.
      { exclude: [['.ant-message'], ['.ant-notification'], ['.ant-select-dropdown'], ['.ant-tooltip']] },
      { resultTypes: ['violations'] },
    );
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => {
        // a contrast failure names its colours; other rules what axe checked
        const why = (n) => {
          const d = n.any[0]?.data;
          if (v.id === 'color-contrast' && d) return ` [${d.fgColor} on ${d.bgColor}: ${d.contrastRatio}]`;
          const m = [...n.any, ...n.all, ...n.none].map((c) => c.message).join('; ');
          return m ? ` [${m.slice(0, 160)}]` : '';
        };
        const targets = v.nodes.slice(0, 4).map((n) => n.target.join(' ') + why(n));
        const more = v.nodes.length > 4 ? ` and ${v.nodes.length - 4} more` : '';
        return `${v.id} (${v.impact}): ${v.help}: ${targets.join(', ')}${more}`;
      });
  });
}
