// Settings → MCP servers waiting for a sign-in (OAuth; docs/tools.md). Shown to admins
// only, and only when a server waits: each has a "Sign in" link to its authorization
// server's page, opened in a new tab; the page sends the browser back to Navi, which
// then connects (the notice is gone the next time Settings open).

import { api } from './api.js';
import { h } from './dom.js';

/** GET /mcp/sign-ins' servers; [] for a user who is not an admin or when it fails. */
export async function waitingSignIns() {
  try {
    return (await api.mcpSignIns()).servers || [];
  } catch {
    return [];
  }
}

/** The notice for `servers` (from waitingSignIns), or null when none waits. */
export function mcpSignInSection(servers) {
  const links = servers.filter((s) => /^https?:\/\//i.test(s.url || ''));
  if (!links.length) return null;
  return h('section', { class: 'settings-mcp-sign-in', 'data-testid': 'mcp-sign-ins', role: 'status' },
    h('h3', { text: 'MCP servers waiting for a sign-in' }),
    h('ul', {}, ...links.map((s) => h('li', {},
      h('span', { text: `${s.name} ` }),
      h('a', {
        href: s.url, target: '_blank', rel: 'noopener noreferrer', class: 'button',
        'data-server': s.name, text: 'Sign in',
      })))),
    h('p', { class: 'settings-hint', text: 'Navi connects once the sign-in is done; its tokens stay on this server.' }));
}
