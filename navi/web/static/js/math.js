// LaTeX in answers: $…$ and \(…\) inline, $$…$$ and \[…\] displayed, typeset by KaTeX.
//
// marked turns each formula into a placeholder that carries its TeX (`data-tex`) and shows
// it as plain text; after the sanitised HTML is in the page, typeset() renders the
// placeholders with katex.render, which builds DOM nodes (styles set through the CSSOM, so
// the page's Content-Security-Policy, with no inline styles, lets them through). KaTeX
// runs with `trust: false`: no \href, \url or \includegraphics, nothing that loads.
//
// KaTeX (vendor/katex/) is loaded the first time an answer holds a formula, not before.

const KATEX_JS = 'vendor/katex/katex.min.js';
const KATEX_CSS = 'vendor/katex/katex.min.css';
const OPTIONS = { throwOnError: true, trust: false, strict: 'ignore', maxSize: 50, maxExpand: 1000 };
const CACHE_LIMIT = 300;

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (text) => text.replace(/[&<>"']/g, (c) => ESCAPES[c]);

// Display math on lines of its own.
const BLOCK = [/^ {0,3}\$\$([\s\S]+?)\$\$[ \t]*(?:\n+|$)/, /^ {0,3}\\\[([\s\S]+?)\\\][ \t]*(?:\n+|$)/];
// Inline: $…$ only when it cannot be money (Pandoc's rule: no space inside the dollars,
// no digit right after the closing one), so "$5 and $10" stays text.
const INLINE = [
  [/^\$\$([\s\S]+?)\$\$/, true],
  [/^\\\[([\s\S]+?)\\\]/, true],
  [/^\\\(([\s\S]+?)\\\)/, false],
  [/^\$(?![\s$])((?:\\.|[^\\$\n])+?)(?<!\s)\$(?!\d)/, false],
];

// A displayed formula inside a paragraph is a <span> (shown as a block by the stylesheet):
// a <div> there would end the paragraph when the HTML is parsed.
function placeholder(tex, display, block = false) {
  const tag = block ? 'div' : 'span';
  const kind = display ? 'math-display' : 'math-inline';
  return `<${tag} class="math ${kind}" data-tex="${escapeHtml(tex)}">${escapeHtml(tex)}</${tag}>`;
}

/** The marked extension: math tokens and their placeholders. */
export const mathExtension = {
  extensions: [
    {
      name: 'mathBlock',
      level: 'block',
      start: (src) => src.match(/^ {0,3}(?:\$\$|\\\[)/m)?.index,
      tokenizer(src) {
        for (const rule of BLOCK) {
          const match = rule.exec(src);
          if (match && match[1].trim()) return { type: 'mathBlock', raw: match[0], tex: match[1].trim() };
        }
        return undefined;
      },
      renderer: (token) => `${placeholder(token.tex, true, true)}\n`,
    },
    {
      name: 'mathInline',
      level: 'inline',
      start: (src) => src.match(/\$|\\[([]/)?.index,
      tokenizer(src) {
        for (const [rule, display] of INLINE) {
          const match = rule.exec(src);
          if (match && match[1].trim()) {
            return { type: 'mathInline', raw: match[0], tex: match[1].trim(), display };
          }
        }
        return undefined;
      },
      renderer: (token) => placeholder(token.tex, token.display),
    },
  ],
};

let loading = null;
const rendered = new Map(); // `${display}:${tex}` → a typeset node to clone

function loadKatex() {
  if (window.katex) return Promise.resolve(window.katex);
  if (!loading) {
    const css = document.createElement('link');
    css.rel = 'stylesheet';
    css.href = KATEX_CSS;
    document.head.append(css);
    loading = new Promise((resolve, reject) => {
      const script = document.createElement('script');
      script.src = KATEX_JS;
      script.onload = () => resolve(window.katex);
      script.onerror = () => reject(new Error('KaTeX could not be loaded'));
      document.head.append(script);
    });
    // Once loaded, what was drawn meanwhile is typeset; a failure may be retried later.
    loading.then(() => typeset(document), () => { loading = null; });
  }
  return loading;
}

function renderNode(katex, tex, display) {
  const key = `${display}:${tex}`;
  let node = rendered.get(key);
  if (!node) {
    node = document.createElement('span');
    try {
      katex.render(tex, node, { ...OPTIONS, displayMode: display });
    } catch (error) {
      // Not valid TeX (or mid-stream): the source, marked as such.
      node.className = 'math-error';
      node.title = error && error.message ? error.message : 'Not valid TeX';
      node.textContent = display ? `$$${tex}$$` : `$${tex}$`;
    }
    if (rendered.size >= CACHE_LIMIT) rendered.delete(rendered.keys().next().value);
    rendered.set(key, node);
  }
  return node.cloneNode(true);
}

/** Typeset the formula placeholders under root (loading KaTeX the first time). */
export function typeset(root) {
  const pending = root.querySelectorAll('.math[data-tex]:not([data-typeset])');
  if (!pending.length) return;
  const katex = window.katex;
  if (!katex) {
    loadKatex().catch(() => {});
    return;
  }
  for (const el of pending) {
    const display = el.classList.contains('math-display');
    el.replaceChildren(renderNode(katex, el.dataset.tex, display));
    el.dataset.typeset = '1';
  }
}
