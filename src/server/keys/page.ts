/**
 * The keys page's HTML (DESIGN §5, §7): server-rendered, no JavaScript, one stylesheet inline.
 * Every control is found by its accessible name (the names DESIGN §7 fixes), headings run in
 * order, focus is always visible, and the layout holds from a phone to a desktop.
 *
 * Rendering only: every value is escaped here, every decision is made by the routes.
 */
import { formatPrice, PACKS } from '#vidsheet/core/packs.js';

export interface KeyRow {
  id: number;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface UsageRowView {
  createdAt: string;
  surface: string;
  density: string;
  sheets: number;
  /** Net credits: a refunded job shows 0. */
  credits: number;
}

export type PageState =
  | {
      kind: 'signed-out';
      csrf: string;
      /** After "Send code": the address the code went to, and the Code form. */
      codeSentTo?: string;
      /** A message above the form (wrong code, rate limit, bad address). */
      notice?: string;
    }
  | {
      kind: 'signed-in';
      csrf: string;
      email: string;
      balance: number;
      keys: KeyRow[];
      /** A key minted by the previous request, shown this once. */
      newKey?: string;
      buyingEnabled: boolean;
      usage: UsageRowView[];
      page: number;
      hasNextPage: boolean;
      notice?: string;
    };

const html = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/** `2026-11-23 14:05 UTC`: unambiguous and short. */
const when = (iso: string): string => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;

const SURFACES: Record<string, string> = { http: 'HTTP API', mcp: 'Remote MCP' };

const STYLE = `
:root { color-scheme: light dark; --fg: #1b1b1b; --bg: #fafafa; --muted: #5d5d5d; --line: #d0d0d0;
  --accent: #0b57d0; --panel: #ffffff; --warn: #8a4b00; }
@media (prefers-color-scheme: dark) { :root { --fg: #ececec; --bg: #141414; --muted: #a8a8a8;
  --line: #3a3a3a; --accent: #8ab4f8; --panel: #1e1e1e; --warn: #f0b35a; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
main { max-width: 52rem; margin: 0 auto; padding: 1.25rem; }
h1 { font-size: 1.6rem; margin: 0.5rem 0 1rem; }
h2 { font-size: 1.2rem; margin: 0 0 0.75rem; }
section { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem;
  margin: 0 0 1rem; }
label { display: block; font-weight: 600; margin-bottom: 0.25rem; }
input { font: inherit; padding: 0.5rem 0.6rem; border: 1px solid var(--line); border-radius: 6px;
  width: 100%; max-width: 22rem; background: var(--bg); color: var(--fg); }
button { font: inherit; padding: 0.5rem 0.9rem; border-radius: 6px; border: 1px solid var(--accent);
  background: var(--accent); color: var(--bg); cursor: pointer; margin-top: 0.5rem; }
button.secondary { background: transparent; color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.notice { border-left: 4px solid var(--warn); padding: 0.5rem 0.75rem; margin: 0 0 1rem; }
.muted { color: var(--muted); }
.key { font-family: ui-monospace, monospace; word-break: break-all; padding: 0.5rem; border: 1px dashed var(--line); }
.row { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: center; margin: 0 0 1rem; }
ul.plain { list-style: none; padding: 0; margin: 0; }
ul.plain li { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: baseline; padding: 0.4rem 0;
  border-bottom: 1px solid var(--line); }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.35rem 0.6rem; border-bottom: 1px solid var(--line); white-space: nowrap; }
td.num, th.num { text-align: right; }
`;

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${html(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

const csrfField = (csrf: string) => `<input type="hidden" name="_csrf" value="${html(csrf)}">`;
const notice = (text: string | undefined) =>
  text ? `<p class="notice" role="status">${html(text)}</p>` : '';

function signedOut(state: Extract<PageState, { kind: 'signed-out' }>): string {
  const emailForm = `<form method="post" action="/keys/code">
  ${csrfField(state.csrf)}
  <label for="email">Email</label>
  <input id="email" name="email" type="email" autocomplete="email" required value="${html(state.codeSentTo ?? '')}">
  <div><button type="submit"${state.codeSentTo ? ' class="secondary"' : ''}>Send code</button></div>
</form>`;
  const codeForm = state.codeSentTo
    ? `<form method="post" action="/keys/sign-in">
  ${csrfField(state.csrf)}
  <input type="hidden" name="email" value="${html(state.codeSentTo)}">
  <p>If ${html(state.codeSentTo)} can sign in, a six-digit code is on its way. It is valid for 10 minutes.</p>
  <label for="code">Code</label>
  <input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required autofocus>
  <div><button type="submit">Sign in</button></div>
</form>`
    : '';
  return layout(
    'vidsheet — API keys and credits',
    `<h1>vidsheet API keys and credits</h1>
<section aria-labelledby="sign-in">
<h2 id="sign-in">Sign in</h2>
${notice(state.notice)}
<p class="muted">We mail you a one-time code; there is no password. A new address gets an account at its first sign-in.</p>
${state.codeSentTo ? `${codeForm}\n<p class="muted">No mail? Check the address and send a new code:</p>\n${emailForm}` : emailForm}
</section>`,
  );
}

function signedIn(state: Extract<PageState, { kind: 'signed-in' }>): string {
  const csrf = csrfField(state.csrf);
  const active = state.keys.filter((k) => k.revokedAt === null);
  const keyList = active.length
    ? `<ul class="plain">${active
        .map(
          (k) => `<li><code id="key-${k.id}">${html(k.prefix)}…</code>
<span class="muted">created ${html(when(k.createdAt))}</span>
<form method="post" action="/keys/revoke">${csrf}<input type="hidden" name="key_id" value="${k.id}">
<button type="submit" class="secondary" aria-describedby="key-${k.id}">Revoke</button></form></li>`,
        )
        .join('\n')}</ul>`
    : '<p class="muted">No active keys.</p>';
  const newKey = state.newKey
    ? `<div class="notice" role="status"><p><strong>Your new API key:</strong></p>
<p class="key">${html(state.newKey)}</p>
<p>Copy it now: it cannot be shown again. Send it as <code>Authorization: Bearer &lt;key&gt;</code>.</p></div>`
    : '';
  const packs = PACKS.map(
    (p) => `<form method="post" action="/keys/buy">${csrf}<input type="hidden" name="pack" value="${p.id}">
<button type="submit"${state.buyingEnabled ? '' : ' disabled'}>Buy ${p.credits} credits for ${formatPrice(p.cents)}</button></form>`,
  ).join('\n');
  const rows = state.usage
    .map(
      (u) => `<tr><td>${html(when(u.createdAt))}</td><td>${html(SURFACES[u.surface] ?? u.surface)}</td>
<td>${html(u.density)}</td><td class="num">${u.sheets}</td><td class="num">${u.credits}</td></tr>`,
    )
    .join('\n');
  const pager = [
    state.page > 1 ? `<a href="/keys?page=${state.page - 1}">Newer jobs</a>` : '',
    state.hasNextPage ? `<a href="/keys?page=${state.page + 1}">Older jobs</a>` : '',
  ]
    .filter(Boolean)
    .join(' · ');
  return layout(
    'vidsheet — API keys and credits',
    `<h1>vidsheet API keys and credits</h1>
<div class="row"><span>Signed in as ${html(state.email)}</span>
<form method="post" action="/keys/sign-out">${csrf}<button type="submit" class="secondary">Sign out</button></form></div>
${notice(state.notice)}
<section aria-labelledby="balance">
<h2 id="balance">Balance: ${state.balance} credits</h2>
<p class="muted">A sheet costs 1, 2, 3 or 5 credits for 3x3, 4x4, 5x5 or 6x6. Until you buy credits, your balance is topped up to 7 credits at your first job of each day (UTC).</p>
</section>
<section aria-labelledby="keys">
<h2 id="keys">API keys</h2>
${newKey}
${keyList}
<form method="post" action="/keys/create-key">${csrf}<button type="submit">Create key</button></form>
<p class="muted">To rotate a key, create a new one, switch your clients to it, then revoke the old one.</p>
</section>
<section aria-labelledby="buy">
<h2 id="buy">Buy credits</h2>
${state.buyingEnabled ? '' : '<p class="notice">Buying is unavailable on this server right now.</p>'}
<div class="row">${packs}</div>
<p class="muted">Payment is handled by Stripe Checkout; credits arrive as soon as the payment is confirmed.</p>
</section>
<section aria-labelledby="usage">
<h2 id="usage">Usage</h2>
${
  state.usage.length
    ? `<div class="table-wrap"><table>
<caption class="muted">One row per job, newest first; a refunded job costs 0.</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Surface</th><th scope="col">Density</th><th scope="col" class="num">Sheets</th><th scope="col" class="num">Credits</th></tr></thead>
<tbody>
${rows}
</tbody></table></div>`
    : '<p class="muted">No jobs yet.</p>'
}
${pager ? `<p>${pager}</p>` : ''}
</section>
<section aria-labelledby="data">
<h2 id="data">Your videos</h2>
<p class="muted">A video sent to <code>POST /v1/vidsheet</code> or fetched by the remote endpoint is used only for its own job and deleted the moment the job ends. The one exception is a video you keep with <code>POST /v1/videos</code> to zoom into it: it serves your zooms and nothing else, and is deleted when you <code>DELETE</code> it or when it expires (its <code>expires_at</code>), from storage and every copy.</p>
</section>`,
  );
}

export function renderKeysPage(state: PageState): string {
  return state.kind === 'signed-out' ? signedOut(state) : signedIn(state);
}
