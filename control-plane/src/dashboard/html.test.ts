import { describe, expect, it } from 'vitest';
import { usd, when } from './format.js';
import { html, jsonData, raw } from './html.js';
import { cookie, createCsrf, readCookies } from './security.js';

describe('the html tag', () => {
  it('escapes every value it is given, and keeps markup it built', () => {
    const name = `<script>alert("x")</script> & 'quotes'`;
    const page = html`<p title="${name}">${name}${html`<b>${1}</b>`}${[html`<i>a</i>`, '<c>']}${null}${false}</p>`;
    expect(page.text).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quotes&#39;">' +
        '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quotes&#39;<b>1</b><i>a</i>&lt;c&gt;</p>',
    );
    expect(html`${raw('<hr>')}`.text).toBe('<hr>');
  });

  it('writes JSON that no value can close its script tag with', () => {
    expect(jsonData({ label: '</script><script>x()</script>' }).text).toBe(
      '{"label":"\\u003c/script>\\u003cscript>x()\\u003c/script>"}',
    );
  });
});

describe('formats', () => {
  it('writes dollars from micro-dollars', () => {
    expect(usd(0)).toBe('$0.00');
    expect(usd(25_000_000)).toBe('$25.00');
    expect(usd(1_234_567_890)).toBe('$1,234.56789');
    expect(usd(1_500)).toBe('$0.0015');
    expect(usd(-12_500_000)).toBe('−$12.50');
  });

  it('writes times in UTC to the minute', () => {
    expect(when(new Date('2026-11-24T12:05:59.999Z'))).toBe('2026-11-24 12:05 UTC');
    expect(when(null)).toBe('never');
  });
});

describe('cookies and CSRF tokens', () => {
  it('reads the cookie header and writes HTTP-only, SameSite=Strict dashboard cookies', () => {
    expect(readCookies('a=1; svc_dash_session=dsess_x%3D; b')).toEqual(
      new Map([
        ['a', '1'],
        ['svc_dash_session', 'dsess_x='],
      ]),
    );
    expect(cookie('n', 'v', { secure: true, maxAgeSeconds: 60 })).toBe(
      'n=v; Path=/dashboard; HttpOnly; SameSite=Strict; Secure; Max-Age=60',
    );
    expect(cookie('n', 'v', { secure: false })).toBe('n=v; Path=/dashboard; HttpOnly; SameSite=Strict');
  });

  it('tie a token to its session and to the deployment’s secret', () => {
    const csrf = createCsrf('secret one');
    const token = csrf.tokenOf('session', 'dsess_a');
    expect(csrf.verify('session', 'dsess_a', token)).toBe(true);
    expect(csrf.verify('session', 'dsess_b', token)).toBe(false);
    expect(csrf.verify('pre', 'dsess_a', token)).toBe(false);
    expect(csrf.verify('session', 'dsess_a', [token])).toBe(false);
    expect(csrf.verify('session', 'dsess_a', undefined)).toBe(false);
    expect(createCsrf('secret two').verify('session', 'dsess_a', token)).toBe(false);
  });
});
