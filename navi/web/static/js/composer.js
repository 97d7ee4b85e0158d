// The message box: Enter sends, Shift+Enter is a new line, Esc stops a run. While an
// answer streams the box stays open: Enter queues the message for after it. Images
// (pasted, dropped or picked) are shown as thumbnails and sent inline; other files are
// uploaded at once (POST /sessions/{id}/files, with a progress bar) and referenced.
// `/` at the start opens the MCP prompts menu (prompt_menu.js).

import { api } from './api.js';
import { clear, formatBytes, h } from './dom.js';
import { icon } from './icons.js';
import { PromptMenu } from './prompt_menu.js';
import { state, subscribe } from './state.js';

const MAX_IMAGES = 10;
const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
const MAX_ROWS_PX = 240;

let nextId = 1;

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error || new Error('cannot read the file'));
    reader.readAsDataURL(file);
  });
}

export class Composer {
  /** onSend({content, images, files}) → Promise<boolean>; ensureSession() → Promise<id>. */
  constructor({ form, textarea, send, stop, attach, fileInput, attachments, error, onSend, onStop, ensureSession }) {
    Object.assign(this, { form, textarea, sendButton: send, stopButton: stop, fileInput, attachmentsEl: attachments, errorEl: error });
    this.onSend = onSend;
    this.onStop = onStop;
    this.ensureSession = ensureSession;
    this.images = []; // {id, src, name, size}
    this.files = []; // {id, file, status: uploading|done|failed, progress, ref, error, abort}

    send.append(icon('send'));
    stop.append(icon('stop'));
    attach.append(icon('paperclip'));
    attach.addEventListener('click', () => fileInput.click());
    fileInput.addEventListener('change', () => {
      this.addFiles([...fileInput.files]);
      fileInput.value = '';
    });
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
    stop.addEventListener('click', () => this.onStop());
    textarea.addEventListener('keydown', (event) => this.keydown(event));
    textarea.addEventListener('input', () => this.autosize());
    textarea.addEventListener('paste', (event) => {
      const files = [...(event.clipboardData?.files || [])];
      if (files.length) {
        event.preventDefault();
        this.addFiles(files);
      }
    });
    form.addEventListener('dragover', (event) => {
      event.preventDefault();
      form.classList.add('dragging');
    });
    form.addEventListener('dragleave', () => form.classList.remove('dragging'));
    form.addEventListener('drop', (event) => {
      event.preventDefault();
      form.classList.remove('dragging');
      this.addFiles([...(event.dataTransfer?.files || [])]);
    });
    this.hint = form.querySelector('.composer-hint');
    // `/` at the start of the box: the MCP servers' prompts (prompt_menu.js).
    this.prompts = new PromptMenu(this);
    subscribe(['running', 'connection', 'sessionId'], () => this.renderLock());
    this.renderLock();
  }

  keydown(event) {
    if (this.prompts.keydown(event)) return;
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      this.submit();
    } else if (event.key === 'Escape' && state.running) {
      event.preventDefault();
      this.onStop();
    }
  }

  autosize() {
    this.textarea.style.height = 'auto';
    this.textarea.style.height = `${Math.min(this.textarea.scrollHeight, MAX_ROWS_PX)}px`;
  }

  focus() {
    // Never take the caret from another field being typed in (a chat being renamed).
    const active = document.activeElement;
    if (active && active !== this.textarea && active.matches('input[type="text"], input[type="search"]')) return;
    this.textarea.focus();
  }

  renderLock() {
    const running = state.running;
    this.form.classList.toggle('locked', running);
    this.form.classList.toggle('running', running);
    this.sendButton.hidden = running;
    this.stopButton.hidden = !running;
    this.sendButton.disabled = state.sessionId !== null && state.connection !== 'open';
    this.textarea.placeholder = running ? 'Queue a message for after this answer' : 'Message Navi';
    if (this.hint) {
      this.hint.textContent = running
        ? 'Enter to queue · Esc to stop'
        : 'Enter to send · Shift+Enter for a new line';
    }
  }

  showError(message) {
    this.errorEl.hidden = !message;
    clear(this.errorEl);
    if (message) this.errorEl.append(icon('alert'), h('span', { text: message }));
  }

  // ---------------------------------------------------------------- attachments

  async addFiles(files) {
    this.showError(null);
    for (const file of files) {
      if (file.type.startsWith('image/')) await this.addImage(file);
      else await this.upload(file);
    }
  }

  async addImage(file) {
    if (this.images.length >= MAX_IMAGES) {
      this.showError(`At most ${MAX_IMAGES} images per message.`);
      return;
    }
    if (file.size > MAX_IMAGE_BYTES) {
      this.showError(`${file.name || 'The image'} is ${formatBytes(file.size)}; images may be at most 5 MB.`);
      return;
    }
    try {
      const src = await readAsDataUrl(file);
      this.images.push({ id: nextId++, src, name: file.name || 'image', size: file.size });
      this.renderAttachments();
    } catch (error) {
      this.showError(`Cannot read ${file.name}: ${error.message}`);
    }
  }

  async upload(file) {
    const entry = { id: nextId++, file, status: 'uploading', progress: 0, ref: null, error: '', abort: null };
    this.files.push(entry);
    this.renderAttachments();
    let sessionId;
    try {
      sessionId = await this.ensureSession();
    } catch (error) {
      entry.status = 'failed';
      entry.error = error.message;
      this.renderAttachments();
      return;
    }
    const { promise, abort } = api.uploadFile(sessionId, file, (fraction) => {
      entry.progress = fraction;
      this.renderProgress(entry);
    });
    entry.abort = abort;
    try {
      const result = await promise;
      entry.status = 'done';
      entry.progress = 1;
      entry.ref = { name: result.name || file.name, path: result.path };
    } catch (error) {
      entry.status = 'failed';
      entry.error = error.message;
    }
    this.renderAttachments();
  }

  removeImage(id) {
    this.images = this.images.filter((image) => image.id !== id);
    this.renderAttachments();
  }

  removeFile(id) {
    const entry = this.files.find((f) => f.id === id);
    if (entry && entry.status === 'uploading' && entry.abort) entry.abort();
    this.files = this.files.filter((f) => f.id !== id);
    this.renderAttachments();
  }

  renderProgress(entry) {
    const bar = this.attachmentsEl.querySelector(`[data-upload="${entry.id}"] .progress-fill`);
    if (bar) bar.style.width = `${Math.round(entry.progress * 100)}%`;
  }

  renderAttachments() {
    clear(this.attachmentsEl);
    const removeButton = (label, onclick) => h('button', { type: 'button', class: 'remove-attachment', title: label, 'aria-label': label, onclick }, icon('close'));
    for (const image of this.images) {
      this.attachmentsEl.append(h('div', { class: 'attachment image', 'data-testid': 'image-attachment' },
        h('img', { src: image.src, alt: image.name }),
        removeButton(`Remove ${image.name}`, () => this.removeImage(image.id))));
    }
    for (const entry of this.files) {
      const progress = h('div', { class: 'progress' }, h('div', { class: 'progress-fill', style: `width:${Math.round(entry.progress * 100)}%` }));
      const detail = entry.status === 'failed' ? entry.error : entry.status === 'uploading' ? 'Uploading…' : formatBytes(entry.file.size);
      this.attachmentsEl.append(h('div', { class: `attachment file ${entry.status}`, 'data-upload': entry.id, 'data-testid': 'file-attachment' },
        icon(entry.status === 'failed' ? 'alert' : 'file'),
        h('div', { class: 'attachment-text' },
          h('span', { class: 'attachment-name', text: entry.file.name }),
          h('span', { class: 'attachment-detail', text: detail }),
          entry.status === 'uploading' && progress),
        removeButton(`Remove ${entry.file.name}`, () => this.removeFile(entry.id))));
    }
    this.attachmentsEl.hidden = !this.images.length && !this.files.length;
  }

  // ---------------------------------------------------------------- sending

  async submit() {
    const content = this.textarea.value.trim();
    if (this.files.some((f) => f.status === 'uploading')) {
      this.showError('Wait until the uploads have finished.');
      return;
    }
    if (!content) {
      if (this.images.length || this.files.length) this.showError('Write a message to send with the attachments.');
      return;
    }
    const message = {
      content,
      images: this.images.map((image) => image.src),
      files: this.files.filter((f) => f.status === 'done').map((f) => f.ref),
    };
    this.showError(null);
    const draft = { text: this.textarea.value, images: this.images, files: this.files };
    this.textarea.value = '';
    this.images = [];
    this.files = [];
    this.renderAttachments();
    this.autosize();
    const sent = await this.onSend(message);
    if (!sent) {
      // Give the user their message back, so nothing is lost.
      this.textarea.value = draft.text;
      this.images = draft.images;
      this.files = draft.files;
      this.renderAttachments();
      this.autosize();
    }
  }
}
