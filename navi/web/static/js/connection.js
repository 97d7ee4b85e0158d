// The WebSocket of one session: connects with `?after=<highest seq seen>`, drops frames
// it has already seen (so nothing is shown twice), and reconnects with backoff when the
// connection is lost (a server restart included) — so nothing is lost either.
// Subagent frames carry the seq of the subagent's own stream (`subagent_id`): they are
// counted per subagent and resumed with `?sub_after=<id>:<seq>,…`.
// One event may give several frames with its seq (thinking_end and the first text after
// the thinking; a fatal error and its stream_end): frames on one connection come in
// order, so one with the last seq is new too; `?seen=<n>` tells a reconnect how many of
// that event's frames the page has, and it sends the rest.

import { askToken, wsTicket } from './auth.js';

const BACKOFF_MS = [300, 1000, 2000, 3000, 5000];
// Close codes a server may use for "not authorised" (4401 ours, 4003/1008 common ones).
const AUTH_CODES = new Set([4401, 4003, 1008]);
const NOT_FOUND = 4004;
const MAX_SUB_AFTER = 32;

export class Connection {
  /**
   * onFrame(frame): each new frame, in order.
   * onStatus(status): 'connecting' | 'open' | 'lost' | 'gone' | 'closed'.
   * probe(): before a reconnect, resolves to 'ok' | 'gone' | 'retry' (a REST call that
   *   also asks for a token on 401).
   */
  constructor(sessionId, { after = 0, onFrame, onStatus, probe }) {
    this.sessionId = sessionId;
    this.lastSeq = after;
    this.seenAtLast = 0; // frames of event lastSeq seen (0: its frames came with the history)
    this.subSeq = new Map(); // subagent_id → highest seq seen of that stream
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.probe = probe;
    this.ws = null;
    this.stopped = false;
    this.attempt = 0;
    this.timer = null;
    this.waiters = [];
    this.generation = 0; // a stop (or a newer connect) makes an older connect give up
    this.authRefusals = 0; // in a row: a ticket may expire once, a token is asked after
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    this.generation += 1;
    clearTimeout(this.timer);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close(1000);
    }
    this.ws = null;
    this.onStatus('closed');
  }

  get isOpen() {
    return !!this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  /** Resolves when the socket is open (rejects after timeoutMs). */
  whenOpen(timeoutMs = 10000) {
    if (this.isOpen) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('not connected to the server')), timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Send a JSON message; false when the socket is not open. */
  send(message) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }

  url(ticket) {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const params = new URLSearchParams({ after: String(this.lastSeq) });
    if (this.seenAtLast) params.set('seen', String(this.seenAtLast));
    if (this.subSeq.size) {
      // The most recent subagents are the ones that may still run.
      const recent = [...this.subSeq].slice(-MAX_SUB_AFTER);
      params.set('sub_after', recent.map(([id, seq]) => `${id}:${seq}`).join(','));
    }
    params.set('ticket', ticket);
    return `${scheme}://${location.host}/ws/sessions/${encodeURIComponent(this.sessionId)}?${params}`;
  }

  async connect() {
    if (this.stopped) return;
    const generation = ++this.generation;
    this.onStatus(this.attempt ? 'lost' : 'connecting');
    let ticket;
    try {
      ticket = await wsTicket();
    } catch {
      ticket = undefined; // the server cannot be reached: try again later
    }
    if (this.stopped || generation !== this.generation) return;
    if (ticket === null) {
      this.onStatus('lost'); // no token given
      return;
    }
    if (ticket === undefined) {
      this.closed({ code: 1006 });
      return;
    }
    const ws = new WebSocket(this.url(ticket));
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.authRefusals = 0;
      this.onStatus('open');
      for (const wake of this.waiters.splice(0)) wake();
    };
    ws.onmessage = (event) => this.receive(event.data);
    ws.onclose = (event) => this.closed(event);
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      console.warn('navi: a frame that is not JSON', data);
      return;
    }
    if (!this.isNew(frame)) return; // seen already (a replay after reconnecting)
    try {
      this.onFrame(frame);
    } catch (error) {
      // One frame the page cannot draw must not stop the next ones.
      console.error('navi: drawing a frame failed', frame, error);
    }
  }

  isNew(frame) {
    // A call that still waits for the user is sent again on every connect, with its old
    // seq: the page may have lost it (a reload). approvals.js knows it by its call_id.
    // (Its event gives that one frame only: at or below the seq seen, it is the resend.)
    if (frame.type === 'approval_required' && Number.isInteger(frame.seq)) {
      const known = frame.is_subagent ? (this.subSeq.get(frame.subagent_id) ?? 0) : this.lastSeq;
      if (frame.seq <= known) return true;
    }
    return this.isNewSeq(frame);
  }

  isNewSeq(frame) {
    if (!Number.isInteger(frame.seq)) return true; // not from the log (an error reply)
    if (frame.is_subagent) {
      if (!frame.subagent_id) return true;
      const seen = this.subSeq.get(frame.subagent_id) ?? 0;
      if (frame.seq < seen) return false;
      this.subSeq.delete(frame.subagent_id); // re-insert: keeps the map in recency order
      this.subSeq.set(frame.subagent_id, frame.seq);
      return true;
    }
    if (frame.seq < this.lastSeq) return false;
    if (frame.seq === this.lastSeq) {
      this.seenAtLast += 1;
    } else {
      this.lastSeq = frame.seq;
      this.seenAtLast = 1;
    }
    return true;
  }

  async closed(event) {
    this.ws = null;
    if (this.stopped) return;
    if (event.code === NOT_FOUND) {
      this.onStatus('gone');
      return;
    }
    if (AUTH_CODES.has(event.code)) {
      // A ticket that expired on the way is normal once; refused again, the token is
      // asked for (the ticket request itself asks when REST refuses the token).
      this.authRefusals += 1;
      if (this.authRefusals > 1 && !(await askToken('the live connection was refused'))) {
        this.onStatus('lost');
        return;
      }
      this.connect();
      return;
    }
    this.attempt += 1;
    this.onStatus('lost');
    const delay = BACKOFF_MS[Math.min(this.attempt - 1, BACKOFF_MS.length - 1)];
    this.timer = setTimeout(() => this.reconnect(), delay);
  }

  async reconnect() {
    if (this.stopped) return;
    // A failed WebSocket handshake hides its HTTP status: ask REST whether the session
    // still exists and the token is good before trying again.
    const verdict = this.probe ? await this.probe() : 'ok';
    if (this.stopped) return;
    if (verdict === 'gone') {
      this.onStatus('gone');
      return;
    }
    if (verdict === 'retry') {
      this.attempt += 1;
      const delay = BACKOFF_MS[Math.min(this.attempt - 1, BACKOFF_MS.length - 1)];
      this.timer = setTimeout(() => this.reconnect(), delay);
      return;
    }
    this.connect();
  }
}
