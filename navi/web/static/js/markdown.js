// Markdown for assistant text: marked → DOMPurify → the DOM, code highlighted by
// highlight.js, each code block with a copy button. A MarkdownView re-renders as text
// streams in, at most once per animation frame (less often when rendering is slow).
//
// Showing an answer never calls out: an image from another origin (a tracking pixel, or
// a URL that carries the conversation away) is not fetched but shown as a link the user
// may open. Images of Navi's own origin and data:/blob: URLs show as images.
//
// GFM extras: a table column's alignment becomes a class (align-left/center/right: the
// stylesheet's text-align would beat the align attribute); a task list's [ ] and [x] are
// drawn as disabled checkboxes (role="checkbox", not <input>: answers never get controls);
// LaTeX is typeset by KaTeX (math.js).

import { Marked } from '../vendor/marked.esm.js';
import DOMPurify from '../vendor/purify.es.js';
import hljs from '../vendor/highlight.min.js';
import { copyText, h } from './dom.js';
import { icon } from './icons.js';
import { mathExtension, typeset } from './math.js';

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (text) => text.replace(/[&<>"']/g, (c) => ESCAPES[c]);

function highlighted(text, lang) {
  const language = (lang || '').trim().split(/\s+/)[0].toLowerCase();
  if (language && hljs.getLanguage(language)) {
    try {
      return { language, html: hljs.highlight(text, { language, ignoreIllegals: true }).value };
    } catch {
      // Fall through to plain text.
    }
  }
  return { language, html: escapeHtml(text) };
}

const marked = new Marked({ gfm: true, breaks: false });
marked.use({
  renderer: {
    code({ text, lang }) {
      const { language, html } = highlighted(text, lang);
      const cls = language ? ` language-${escapeHtml(language)}` : '';
      return `<pre><code class="hljs${cls}" data-lang="${escapeHtml(language)}">${html}</code></pre>\n`;
    },
    checkbox({ checked }) {
      const label = checked ? 'done' : 'not done';
      return `<span class="task-box${checked ? ' checked' : ''}" role="checkbox" aria-checked="${checked}" ` +
        `aria-disabled="true" aria-label="${label}"></span> `;
    },
    listitem(item) {
      const body = this.parser.parse(item.tokens);
      return item.task ? `<li class="task-item">${body}</li>\n` : `<li>${body}</li>\n`;
    },
  },
});
marked.use(mathExtension);

const ALIGNMENTS = new Set(['left', 'center', 'right']);

// Model output must not be able to draw controls that look like Navi's own.
// Media other than images would load from wherever they point: not shown at all.
const PURIFY = {
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'option', 'iframe',
    'video', 'audio', 'source', 'track', 'picture', 'object', 'embed', 'image'],
  FORBID_ATTR: ['style', 'srcset', 'poster', 'background', 'ping'],
};

function isLocalImage(src) {
  try {
    const url = new URL(src, window.location.href);
    return url.protocol === 'data:' || url.protocol === 'blob:' || url.origin === window.location.origin;
  } catch {
    return false;
  }
}

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if ((node.tagName === 'TH' || node.tagName === 'TD') && node.hasAttribute('align')) {
    const align = node.getAttribute('align').toLowerCase();
    node.removeAttribute('align');
    if (ALIGNMENTS.has(align)) node.classList.add(`align-${align}`);
  }
  if (node.tagName === 'A' && node.getAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
  // DOMPurify works on an inert document, where nothing loads; the src is taken off here,
  // before the HTML reaches the page, and linkRemoteImages turns the image into a link.
  if (node.tagName === 'IMG') {
    const src = node.getAttribute('src');
    if (src && !isLocalImage(src)) {
      node.removeAttribute('src');
      node.setAttribute('data-remote-src', src);
    }
  }
});

// The notes Navi itself adds at the end of an answer it cut (navi/llm/embedded.py):
// the answer may stop inside a code block, and the note must not be drawn as code.
const ENDING_NOTE = /\n\n\*\((?:The embedded model's answer was cut|Navi stopped the embedded model)[^\n]*\)\*\s*$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/** `text` with a code block that its ending note would fall into closed before it. */
export function closeFenceBeforeNote(text) {
  const note = ENDING_NOTE.exec(text);
  if (!note) return text;
  const body = text.slice(0, note.index);
  let open = null; // the fence of the code block still open, if any
  for (const line of body.split('\n')) {
    const fence = FENCE.exec(line)?.[1];
    if (!fence) continue;
    if (!open) open = fence;
    else if (fence[0] === open[0] && fence.length >= open.length && !line.trim().slice(fence.length)) open = null;
  }
  return open ? `${body}\n${open}${text.slice(note.index)}` : text;
}

/** Markdown text → sanitised HTML string. */
export function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(closeFenceBeforeNote(text || '')), PURIFY);
}

/** Wrap each <pre> in a block with its language and a copy button. */
function decorateCodeBlocks(root) {
  for (const pre of root.querySelectorAll('pre')) {
    if (pre.parentElement && pre.parentElement.classList.contains('code-block')) continue;
    const code = pre.querySelector('code');
    const language = (code && code.dataset.lang) || '';
    const button = h('button', { type: 'button', class: 'copy-code', title: 'Copy code', 'aria-label': 'Copy code' },
      icon('copy'), h('span', { text: 'Copy' }));
    button.addEventListener('click', async () => {
      await copyText((code || pre).textContent);
      button.classList.add('copied');
      button.lastChild.textContent = 'Copied';
      setTimeout(() => {
        button.classList.remove('copied');
        button.lastChild.textContent = 'Copy';
      }, 1500);
    });
    const block = h('div', { class: 'code-block' },
      h('div', { class: 'code-header' }, h('span', { text: language || 'text' }), button));
    pre.replaceWith(block);
    block.append(pre);
  }
}

/** Each image from another origin (see the hook above) → a link to it, never loaded. */
function linkRemoteImages(root) {
  for (const img of root.querySelectorAll('img[data-remote-src]')) {
    const href = img.getAttribute('data-remote-src');
    let safe = false;
    try {
      safe = ['http:', 'https:'].includes(new URL(href, window.location.href).protocol);
    } catch {
      safe = false;
    }
    const label = img.getAttribute('alt') || href;
    const link = safe
      ? h('a', { class: 'remote-image', href, target: '_blank', rel: 'noopener noreferrer',
        title: `Image not loaded (another site): ${href}` }, icon('image'), h('span', { text: label }))
      : h('span', { class: 'remote-image', text: label });
    img.replaceWith(link);
  }
}

/** Render Markdown into an element (replacing its content). */
export function mountMarkdown(el, text) {
  el.innerHTML = renderMarkdown(text);
  linkRemoteImages(el);
  decorateCodeBlocks(el);
  typeset(el);
}

/** Markdown that grows while it streams; renders lazily so each delta costs O(1). */
export class MarkdownView {
  constructor(el) {
    this.el = el;
    this.text = '';
    this.scheduled = false;
    this.lastCost = 0;
    this.onRender = null; // called after each render (the view keeps the scroll pinned)
  }

  append(delta) {
    this.text += delta;
    this.schedule();
  }

  set(text) {
    this.text = text;
    this.schedule();
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    // When a render is slow (a long answer), render less often than every frame.
    const wait = this.lastCost > 12 ? Math.min(this.lastCost * 4, 300) : 0;
    const run = () => requestAnimationFrame(() => this.flush());
    if (wait) setTimeout(run, wait);
    else run();
  }

  flush() {
    this.scheduled = false;
    const started = performance.now();
    mountMarkdown(this.el, this.text);
    this.lastCost = performance.now() - started;
    if (this.onRender) this.onRender();
  }
}
