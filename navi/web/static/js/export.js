// Export a chat as Markdown, in the browser: the session's display history
// (GET /sessions/{id} → messages) as a readable document, downloaded as a .md file.
// What a person reads, not what Navi needs to re-import (that is the JSONL export,
// GET /sessions/{id}/export): user and assistant text, plans, tool calls with their
// outcome, attachments by name; no thinking, no tool output.

import { api } from './api.js';

function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleString();
}

function quote(text) {
  return text.split('\n').map((line) => `> ${line}`).join('\n');
}

/** The chat `session` (as GET /sessions/{id} answers) as Markdown. */
export function chatMarkdown(session, { profileName = '' } = {}) {
  const title = (session.title || '').trim() || 'Chat';
  const out = [`# ${title}`, ''];
  const about = [`Exported from Navi, ${new Date().toLocaleString()}`];
  if (profileName || session.profile_id) about.push(`profile: ${profileName || session.profile_id}`);
  out.push(`*${about.join(' · ')}*`, '');
  let speaker = null;
  const heading = (who, message) => {
    if (speaker === who) return;
    speaker = who;
    const at = when(message.created_at);
    out.push('---', '', `### ${who}${at ? ` · ${at}` : ''}`, '');
  };
  for (const message of session.messages || []) {
    if (message.is_subagent) continue;
    if (message.is_summary) {
      out.push('*Earlier messages were summarised for the model.*', '');
      continue;
    }
    if (message.role === 'user') {
      heading('You', message);
      if (message.content) out.push(message.content, '');
      const images = (message.images || []).length;
      if (images) out.push(`*${images} image${images > 1 ? 's' : ''} attached*`, '');
      for (const file of message.files || []) out.push(`*File: ${file.name || file.path}*`, '');
    } else if (message.role === 'assistant') {
      heading('Navi', message);
      if (message.is_plan) {
        out.push('**Plan**', '', quote(message.content || ''), '');
        continue;
      }
      if (message.content) out.push(message.content, '');
      for (const call of message.tool_calls || []) out.push(`- Tool \`${call.name}\``);
      if ((message.tool_calls || []).length) out.push('');
    } else if (message.role === 'tool') {
      heading('Navi', message);
      out.push(`- \`${message.name || 'tool'}\` ${message.success === false ? 'failed' : 'done'}`, '');
    }
  }
  return `${out.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}

function fileName(title) {
  const base = (title || 'chat').normalize('NFKD').replace(/[^\w\s-]/g, '').trim().replace(/\s+/g, '-').slice(0, 60);
  return `${base || 'chat'}.md`;
}

/** Fetch the chat and download it as Markdown. */
export async function exportChat(sessionId, options) {
  const session = await api.getSession(sessionId);
  const text = chatMarkdown(session, options);
  const url = URL.createObjectURL(new Blob([text], { type: 'text/markdown;charset=utf-8' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = fileName(session.title);
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return text;
}
