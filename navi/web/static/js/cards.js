// DOM builders for the pieces of a conversation: user bubbles, thinking blocks, plan
// cards, tool cards, notices and errors. They know nothing of frames or of history;
// turns.js decides what goes where.

import { authHeaders } from './auth.js';
import { copyText, formatBytes, formatCount, formatSeconds, h } from './dom.js';
import { icon, spinner } from './icons.js';
import { MarkdownView, mountMarkdown } from './markdown.js';
import { state } from './state.js';

// ---------------------------------------------------------------- user messages

/** base64 (no prefix) or a data: URL → a data: URL the <img> can show. */
export function imageSource(image) {
  if (image.startsWith('data:') || image.startsWith('blob:')) return image;
  const mime = image.startsWith('/9j/') ? 'image/jpeg'
    : image.startsWith('R0lG') ? 'image/gif'
      : image.startsWith('UklGR') ? 'image/webp'
        : 'image/png';
  return `data:${mime};base64,${image}`;
}

const SHA256 = /^[0-9a-f]{64}$/;

/** An image the server keeps by content ({sha256, media_type}): fetched from
 *  GET /sessions/{id}/blobs/{sha256} with the access token (an <img src> could not send
 *  it) and shown from an object URL. Resolves to that URL, or null. */
async function blobSource(sessionId, image) {
  if (!sessionId || !SHA256.test(image.sha256 || '')) return null;
  const url = `/sessions/${encodeURIComponent(sessionId)}/blobs/${image.sha256}`;
  try {
    const response = await fetch(url, { headers: authHeaders() });
    if (!response.ok) return null;
    return URL.createObjectURL(await response.blob());
  } catch {
    return null;
  }
}

/** An image of a message of session `sessionId` as base64 to send again (edit & resend):
 *  a reference is fetched and read as a data: URL. Null if it cannot be had. */
export async function imageToSend(sessionId, image) {
  if (typeof image === 'string') return image;
  if (image && image.data) return image.data;
  const src = await blobSource(sessionId, image || {});
  if (!src) return null;
  try {
    const blob = await (await fetch(src)).blob();
    return await new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result));
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(blob);
    });
  } finally {
    URL.revokeObjectURL(src);
  }
}

/** A thumbnail for one image of a message: base64 / a data: URL (logs from before the
 *  blob store, and the message being sent), or a reference to the server's copy. */
function thumbnail(image, alt = 'attached image') {
  const img = h('img', { class: 'thumb', alt });
  img.addEventListener('click', () => { if (img.src) showImage(img.src); });
  if (typeof image === 'string') {
    img.src = imageSource(image);
  } else if (image && typeof image === 'object') {
    if (image.data) {
      img.src = imageSource(image.data);
    } else {
      blobSource(state.sessionId, image).then((src) => {
        if (src) img.src = src;
        else img.alt = 'image no longer available';
      });
    }
  }
  return img;
}

function showImage(src) {
  const overlay = h('div', { class: 'lightbox', role: 'dialog', 'aria-label': 'Image', onclick: () => overlay.remove() },
    h('img', { src, alt: '' }));
  document.addEventListener('keydown', function close(event) {
    if (event.key === 'Escape') {
      overlay.remove();
      document.removeEventListener('keydown', close);
    }
  });
  document.body.append(overlay);
}

export function fileChip(file) {
  const size = Number.isFinite(file.size) ? formatBytes(file.size) : '';
  return h('span', { class: 'file-chip', title: file.path || file.name },
    icon('file'), h('span', { class: 'file-name', text: file.name }),
    size && h('span', { class: 'file-size', text: size }));
}

export function userMessage({ content = '', images = [], files = [], seq = null }, { pending = false } = {}) {
  const thumbs = images.length
    ? h('div', { class: 'message-images' }, images.map((image) => thumbnail(image)))
    : null;
  const chips = files.length ? h('div', { class: 'message-files' }, files.map(fileChip)) : null;
  return h('div', {
    class: pending ? 'message user pending' : 'message user', 'data-role': 'user',
    'data-seq': Number.isInteger(seq) ? seq : null, // its log seq: edit & resend forks before it
  },
    thumbs, chips, content && h('div', { class: 'bubble', text: content }));
}

// ---------------------------------------------------------------- assistant pieces

export function assistantTurn() {
  const body = h('div', { class: 'turn-body' });
  const el = h('div', { class: 'message assistant', 'data-role': 'assistant' },
    h('div', { class: 'avatar', 'aria-hidden': 'true', text: 'N' }), body);
  return { el, body };
}

export function textBlock(text = '') {
  const el = h('div', { class: 'markdown text-block' });
  const view = new MarkdownView(el);
  if (text) {
    view.text = text;
    mountMarkdown(el, text);
  }
  return { el, view };
}

/** A thinking block: open and streaming while live, collapsed once it ends. */
export function thinkingBlock({ text = '', live = false, label = 'Thinking' } = {}) {
  const textEl = h('div', { class: 'thinking-text', text });
  const labelEl = h('span', { class: 'label', text: live ? 'Thinking…' : label });
  const el = h('details', { class: live ? 'thinking live' : 'thinking', open: live },
    h('summary', {}, icon('brain'), labelEl, live && spinner(), icon('chevron', 'icon chevron')),
    textEl);
  const started = performance.now();
  return {
    el,
    append(delta) {
      textEl.textContent += delta;
    },
    end(seconds) {
      const elapsed = Number.isFinite(seconds) ? seconds : (performance.now() - started) / 1000;
      el.classList.remove('live');
      el.open = false;
      labelEl.textContent = elapsed < 1 ? 'Thought briefly' : `Thought for ${formatSeconds(elapsed)}`;
      el.querySelector('.spinner')?.remove();
    },
  };
}

export function planningStatus(label) {
  const text = h('span', { text: label });
  const el = h('div', { class: 'planning-status' }, spinner(), text);
  return { el, set: (value) => { text.textContent = value; } };
}

export function planCard(plan, { open = true } = {}) {
  const body = h('div', { class: 'markdown plan-body' });
  mountMarkdown(body, plan);
  const progress = h('span', { class: 'plan-progress' });
  const el = h('details', { class: 'plan-card', open },
    h('summary', {}, icon('map'), h('span', { class: 'label', text: 'Plan' }), progress,
      icon('chevron', 'icon chevron')),
    body);
  return {
    el,
    setProgress(done, total) {
      progress.textContent = total ? `${done}/${total}` : '';
    },
  };
}

// ---------------------------------------------------------------- tool cards

const SUMMARY_KEYS = ['query', 'url', 'path', 'command', 'task', 'code', 'name', 'action', 'profile_id'];

function argsSummary(args) {
  if (!args || typeof args !== 'object') return args ? String(args) : '';
  const key = SUMMARY_KEYS.find((k) => typeof args[k] === 'string') ||
    Object.keys(args).find((k) => typeof args[k] === 'string');
  const value = key ? args[key] : JSON.stringify(args);
  return value.replace(/\s+/g, ' ').slice(0, 140);
}

function pretty(value) {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') {
    try {
      const parsed = JSON.parse(value);
      if (parsed && typeof parsed === 'object') return JSON.stringify(parsed, null, 2);
    } catch {
      // Not JSON: show as it is.
    }
    return value;
  }
  return JSON.stringify(value, null, 2);
}

function section(label, text) {
  const pre = h('pre', { class: 'tool-pre', text });
  const copy = h('button', { type: 'button', class: 'copy-mini', title: `Copy ${label.toLowerCase()}`, 'aria-label': `Copy ${label.toLowerCase()}` }, icon('copy'));
  copy.addEventListener('click', (event) => {
    event.preventDefault();
    copyText(pre.textContent);
  });
  const el = h('div', { class: 'tool-section' }, h('div', { class: 'tool-label' }, h('span', { text: label }), copy), pre);
  return { el, pre };
}

/**
 * A tool call: a spinner at once, then ✓ or ✗ with the result. The header toggles the
 * arguments and result; a spawn_agent card also holds its subagent's blocks, always shown.
 */
export function toolCard(tool, args) {
  const isAgent = tool === 'spawn_agent';
  const status = h('span', { class: 'tool-status' }, spinner());
  const duration = h('span', { class: 'tool-duration' });
  const argsSection = section('Arguments', pretty(args) || '{}');
  const resultSection = section('Result', '');
  resultSection.el.hidden = true;
  const body = h('div', { class: 'tool-body', hidden: true }, argsSection.el, resultSection.el);
  const head = h('button', { type: 'button', class: 'tool-head', 'aria-expanded': 'false' },
    status,
    icon(isAgent ? 'agent' : 'tool', 'icon tool-icon'),
    h('span', { class: 'tool-name', text: isAgent ? 'Subagent' : tool }),
    h('span', { class: 'tool-summary', text: argsSummary(args) }),
    duration,
    icon('chevron', 'icon chevron'));
  head.addEventListener('click', () => {
    body.hidden = !body.hidden;
    head.setAttribute('aria-expanded', String(!body.hidden));
    el.classList.toggle('expanded', !body.hidden);
  });
  const subagent = isAgent ? h('div', { class: 'subagent', 'data-testid': 'subagent' }) : null;
  const el = h('div', { class: `tool-card running${isAgent ? ' agent' : ''}`, 'data-tool': tool },
    head, body, subagent);
  const started = performance.now();
  let done = false;
  return {
    el,
    tool,
    subagent,
    get done() {
      return done;
    },
    setArgs(value) {
      if (value && Object.keys(value).length) argsSection.pre.textContent = pretty(value);
    },
    /** A block shown under the head, folded or not (the approval panel). */
    attach(block) {
      el.insertBefore(block, body);
    },
    /** The call waits for a person, not for the tool: a shield instead of the spinner. */
    setAwaiting(awaiting) {
      el.classList.toggle('awaiting', awaiting);
      if (done) return;
      status.replaceChildren(awaiting ? icon('shield') : spinner());
      status.title = awaiting ? 'waiting for your approval' : '';
    },
    /** How far the call has got (a tool_progress frame): a bar when the tool said its
     *  total, and its progress line, under the head until the call ends. */
    progress({ progress = 0, total = null, message = '' } = {}) {
      if (done) return;
      let line = el.querySelector(':scope > .tool-progress');
      if (!line) {
        line = h('div', { class: 'tool-progress', 'data-testid': 'tool-progress', role: 'status' },
          h('progress', { class: 'tool-progress-bar' }), h('span', { class: 'tool-progress-text' }));
        el.insertBefore(line, body);
      }
      const bar = line.querySelector('progress');
      const known = Number.isFinite(total) && total > 0;
      if (known) {
        bar.max = total;
        bar.value = Math.min(Math.max(progress, 0), total);
      } else {
        bar.removeAttribute('value'); // indeterminate
      }
      const amount = known ? `${formatCount(progress)} / ${formatCount(total)}` : formatCount(progress);
      line.querySelector('.tool-progress-text').textContent = message ? `${amount} · ${message}` : amount;
    },
    /** `images`: what the tool returned to look at (blob references), shown as
     *  thumbnails under the head, folded or not; a click opens one full size. */
    complete(result, success, images = []) {
      done = true;
      if (images.length && !el.querySelector(':scope > .tool-images')) {
        el.insertBefore(h('div', { class: 'tool-images', 'data-testid': 'tool-images' },
          images.map((image) => thumbnail(image, `image returned by ${tool}`))), body);
      }
      el.classList.remove('running');
      el.querySelector(':scope > .tool-progress')?.remove();
      el.classList.add(success ? 'ok' : 'failed');
      status.replaceChildren(icon(success ? 'check' : 'cross'));
      status.title = success ? 'succeeded' : 'failed';
      resultSection.el.hidden = false;
      resultSection.pre.textContent = pretty(result) || (success ? '(no output)' : '(failed)');
      const seconds = (performance.now() - started) / 1000;
      if (seconds > 0.05 && !el.dataset.history) duration.textContent = formatSeconds(seconds);
    },
    /** No result will come (a stopped run, or history of an interrupted one). */
    abandon(reason = 'no result') {
      if (!done) this.complete(reason, false);
    },
  };
}

// ---------------------------------------------------------------- notices and errors

export function notice(text, kind = 'info') {
  return h('div', { class: `notice ${kind}`, role: 'status' }, icon(kind === 'compress' ? 'compress' : kind === 'profile' ? 'swap' : 'info'), h('span', { text }));
}

export function errorBlock(message, { retry = null, label = 'Retry' } = {}) {
  return h('div', { class: 'error-block', role: 'alert' },
    icon('alert'), h('span', { class: 'error-text', text: message }),
    retry && h('button', { type: 'button', class: 'button small', onclick: retry, text: label }));
}

export function turnFooter({ content = '', stats = [] }) {
  const copy = h('button', { type: 'button', class: 'footer-button', title: 'Copy answer', 'aria-label': 'Copy answer' }, icon('copy'));
  copy.addEventListener('click', async () => {
    await copyText(content);
    copy.replaceChildren(icon('check'));
    setTimeout(() => copy.replaceChildren(icon('copy')), 1500);
  });
  return h('div', { class: 'turn-footer' }, content && copy,
    stats.length ? h('span', { class: 'turn-stats', text: stats.join(' · ') }) : null);
}
