// The composer's prompt menu: `/` at the start of the message box lists the prompts of the
// MCP servers (GET /mcp/prompts), filtered by what follows the slash. Arrows move, Enter
// (or Tab, or a click) picks, Esc closes. A prompt with arguments asks for them in a small
// form; the text the server gives (POST /mcp/prompts/{server}/{name}) replaces the box's
// content, for the user to read, change and send: nothing is sent from here.

import { api } from './api.js';
import { clear, h } from './dom.js';

const SHOWN_MAX = 50;
const FRESH_MS = 30_000; // the list is asked again after this long

export class PromptMenu {
  /** composer: the Composer (its textarea, form, autosize(), showError()). */
  constructor(composer) {
    this.composer = composer;
    this.textarea = composer.textarea;
    this.prompts = null;
    this.fetchedAt = 0;
    this.loading = null;
    this.shown = [];
    this.active = 0;
    this.menu = h('div', { class: 'prompt-menu', id: 'prompt-menu', role: 'listbox', 'aria-label': 'Prompts', hidden: true });
    this.formEl = h('div', { class: 'prompt-form', 'data-testid': 'prompt-form', hidden: true });
    composer.form.prepend(this.menu, this.formEl);
    this.textarea.setAttribute('aria-controls', 'prompt-menu');
    this.textarea.addEventListener('input', () => this.update());
    this.textarea.addEventListener('blur', () => setTimeout(() => {
      if (!this.menu.contains(document.activeElement)) this.close();
    }, 150));
  }

  get open() {
    return !this.menu.hidden;
  }

  /** The query after a leading slash, or null when the box does not ask for the menu. */
  query() {
    const value = this.textarea.value;
    if (!value.startsWith('/') || /\s/.test(value)) return null;
    return value.slice(1).toLowerCase();
  }

  async update() {
    const query = this.query();
    if (query === null) {
      this.close();
      return;
    }
    if (!this.prompts || Date.now() - this.fetchedAt > FRESH_MS) {
      this.render(query, 'Loading prompts…');
      try {
        this.loading ||= api.prompts();
        this.prompts = await this.loading;
        this.fetchedAt = Date.now();
      } catch (error) {
        this.prompts = null;
        this.render(query, `Cannot list the prompts: ${error.message}`);
        return;
      } finally {
        this.loading = null;
      }
      if (this.query() === null) return; // the box changed meanwhile
    }
    this.render(this.query());
  }

  render(query, note = '') {
    clear(this.menu);
    this.menu.hidden = false;
    this.textarea.setAttribute('aria-expanded', 'true');
    if (note) {
      this.shown = [];
      this.menu.append(h('div', { class: 'prompt-note', text: note }));
      return;
    }
    const all = this.prompts || [];
    this.shown = all.filter((p) => [p.name, p.server, p.title || ''].some((t) => t.toLowerCase().includes(query))).slice(0, SHOWN_MAX);
    this.active = Math.min(this.active, Math.max(0, this.shown.length - 1));
    if (!all.length) {
      this.close(); // no MCP server offers prompts: `/` is only a slash
      return;
    }
    if (!this.shown.length) {
      this.menu.append(h('div', { class: 'prompt-note', text: 'No prompt matches' }));
      return;
    }
    this.shown.forEach((prompt, index) => {
      const item = h('div', {
        class: `prompt-item${index === this.active ? ' active' : ''}`,
        role: 'option',
        id: `prompt-option-${index}`,
        'aria-selected': String(index === this.active),
        'data-testid': 'prompt-item',
        'data-prompt': `${prompt.server}/${prompt.name}`,
      },
      h('span', { class: 'prompt-name', text: `/${prompt.name}` }),
      h('span', { class: 'prompt-server', text: prompt.server }),
      prompt.description ? h('span', { class: 'prompt-description', text: prompt.description }) : null);
      item.addEventListener('mousedown', (event) => {
        event.preventDefault(); // the box keeps its focus
        this.choose(prompt);
      });
      this.menu.append(item);
    });
    this.textarea.setAttribute('aria-activedescendant', `prompt-option-${this.active}`);
  }

  move(step) {
    if (!this.shown.length) return;
    this.active = (this.active + step + this.shown.length) % this.shown.length;
    this.render(this.query() ?? '');
    this.menu.querySelector('.prompt-item.active')?.scrollIntoView({ block: 'nearest' });
  }

  /** The composer's keydown, first: true when the menu took the key. */
  keydown(event) {
    if (!this.open) return false;
    const picked = this.shown[this.active];
    // With nothing to pick, Enter sends what was typed ("/etc/hosts is gone"), as always.
    const keys = picked ? {
      ArrowDown: () => this.move(1),
      ArrowUp: () => this.move(-1),
      Escape: () => this.close(),
      Enter: () => this.choose(picked),
      Tab: () => this.choose(picked),
    } : { Escape: () => this.close() };
    const act = keys[event.key];
    if (!picked && event.key === 'Enter') this.close();
    if (!act || event.isComposing || (event.key === 'Enter' && event.shiftKey)) return false;
    event.preventDefault();
    act();
    return true;
  }

  close() {
    this.menu.hidden = true;
    this.active = 0;
    this.textarea.setAttribute('aria-expanded', 'false');
    this.textarea.removeAttribute('aria-activedescendant');
  }

  choose(prompt) {
    this.close();
    if (prompt.arguments?.length) this.askArguments(prompt);
    else this.fill(prompt, {});
  }

  /** A small form with one field per argument; Insert fills the prompt in. */
  askArguments(prompt) {
    clear(this.formEl);
    const error = h('div', { class: 'prompt-form-error', role: 'alert', hidden: true });
    const fields = prompt.arguments.map((arg) => {
      const input = h('input', { type: 'text', name: arg.name, maxlength: 4000, required: arg.required, 'aria-label': arg.name });
      const label = h('label', { class: 'prompt-field' },
        h('span', { class: 'prompt-field-name', text: arg.required ? `${arg.name} *` : arg.name }),
        input,
        arg.description ? h('span', { class: 'prompt-field-hint', text: arg.description }) : null);
      return { arg, input, label };
    });
    const cancel = h('button', { type: 'button', class: 'prompt-cancel', text: 'Cancel' });
    const insert = h('button', { type: 'button', class: 'prompt-insert', text: 'Insert' });
    const submit = async () => {
      const missing = fields.find((f) => f.arg.required && !f.input.value.trim());
      if (missing) {
        error.hidden = false;
        error.textContent = `${missing.arg.name} is needed`;
        missing.input.focus();
        return;
      }
      const args = Object.fromEntries(fields.filter((f) => f.input.value !== '').map((f) => [f.arg.name, f.input.value]));
      insert.disabled = true;
      const done = await this.fill(prompt, args, error);
      insert.disabled = false;
      if (done) this.formEl.hidden = true;
    };
    const dismiss = () => {
      this.formEl.hidden = true;
      this.textarea.focus();
    };
    cancel.addEventListener('click', dismiss);
    insert.addEventListener('click', submit);
    this.formEl.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        dismiss();
      } else if (event.key === 'Enter' && event.target.tagName === 'INPUT') {
        event.preventDefault();
        submit();
      }
    });
    this.formEl.append(
      h('div', { class: 'prompt-form-title', text: `/${prompt.name} · ${prompt.server}` }),
      ...fields.map((f) => f.label),
      error,
      h('div', { class: 'prompt-form-actions' }, cancel, insert));
    this.formEl.hidden = false;
    fields[0]?.input.focus();
  }

  /** The prompt's text into the box (replacing the `/…`); false when the server refused. */
  async fill(prompt, args, errorEl = null) {
    try {
      const { text } = await api.renderPrompt(prompt.server, prompt.name, args);
      this.textarea.value = text;
      this.composer.autosize();
      this.textarea.focus();
      this.textarea.setSelectionRange(text.length, text.length);
      return true;
    } catch (error) {
      if (errorEl) {
        errorEl.hidden = false;
        errorEl.textContent = error.message;
      } else {
        this.composer.showError(`The prompt could not be filled in: ${error.message}`);
      }
      return false;
    }
  }
}
